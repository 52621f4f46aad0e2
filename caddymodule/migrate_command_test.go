package caddymodule

import (
	"bytes"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/storage"
)

func TestParseMigrateArgs(t *testing.T) {
	const dsn = "postgres://u:s3cret@db/palmgate"
	tests := []struct {
		name     string
		args     []string
		from, to migrateEnd
		help     bool
		err      string
	}{
		{name: "the issue's form", args: []string{"--from", "badger", "/var/lib/palmgate", "--to", "postgres", dsn},
			from: migrateEnd{"badger", "/var/lib/palmgate"}, to: migrateEnd{"postgres", dsn}},
		{name: "--to first", args: []string{"--to", "postgres", dsn, "--from", "badger", "d"},
			from: migrateEnd{"badger", "d"}, to: migrateEnd{"postgres", dsn}},
		{name: "flag=backend", args: []string{"--from=badger", "d", "--to=postgres", "{env.PALMGATE_DSN}"},
			from: migrateEnd{"badger", "d"}, to: migrateEnd{"postgres", "{env.PALMGATE_DSN}"}},
		{name: "help", args: []string{"--from", "badger", "--help"}, help: true},
		{name: "-h", args: []string{"-h"}, help: true},
		{name: "nothing", err: "both --from and --to are required"},
		{name: "no --to", args: []string{"--from", "badger", "d"}, err: "both --from and --to are required"},
		{name: "location missing", args: []string{"--from", "badger", "--to", "postgres", dsn}, err: "--from needs a backend and a location"},
		{name: "location missing at the end", args: []string{"--from", "badger", "d", "--to", "postgres"}, err: "--to needs a backend and a location, as in --to postgres <dsn>"},
		{name: "twice", args: []string{"--from", "badger", "d", "--from", "badger", "e"}, err: "--from given twice"},
		{name: "unknown flag", args: []string{"--into", "postgres", dsn}, err: `unknown flag "--into"`},
		{name: "stray argument", args: []string{"--from", "badger", "d", dsn}, err: "unexpected argument 4"},
		{name: "from postgres", args: []string{"--from", "postgres", dsn, "--to", "badger", "d"}, err: "only badger can be migrated from"},
		{name: "to badger", args: []string{"--from", "badger", "d", "--to", "badger", "e"}, err: "only postgres can be migrated to"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from, to, help, err := parseMigrateArgs(tt.args)
			if help != tt.help {
				t.Errorf("help = %v, want %v", help, tt.help)
			}
			if tt.err != "" || tt.help {
				if tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
					t.Errorf("error %v, want one containing %q", err, tt.err)
				}
				if err != nil && strings.Contains(err.Error(), "s3cret") {
					t.Errorf("error %q repeats the DSN's password", err)
				}
				return
			}
			if err != nil || from != tt.from || to != tt.to {
				t.Errorf("got %+v %+v %v, want %+v %+v", from, to, err, tt.from, tt.to)
			}
		})
	}
}

func TestReportComparison(t *testing.T) {
	same := storage.KindComparison{Kind: "agent/d", Source: 2, Target: 2, SourceSum: [32]byte{1}, TargetSum: [32]byte{1}}
	expired := storage.KindComparison{Kind: "oidc/code", Source: 1, Target: 1, Expired: 1}
	differs := storage.KindComparison{Kind: "keys/ES256", Source: 1, Target: 1, SourceSum: [32]byte{1}, TargetSum: [32]byte{2},
		FirstDifference: []byte("keys/ES256/k1")}
	missing := storage.KindComparison{Kind: "palm/h", Source: 3, Target: 2, FirstDifference: []byte("palm/h/x")}

	var out bytes.Buffer
	if err := reportComparison(&out, storage.Comparison{same, expired}, "db:5432/palmgate"); err != nil {
		t.Errorf("matching stores: %v", err)
	}
	for _, want := range []string{"KIND BADGER POSTGRES CHECKSUM", "agent/d 2 2 ok", "3 records of 2 kinds", "1 that expired"} {
		if !strings.Contains(squeeze(out.String()), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	err := reportComparison(&out, storage.Comparison{same, differs, missing}, "db:5432/palmgate")
	if err == nil || !strings.Contains(err.Error(), "2 kinds (keys/ES256, palm/h)") || !strings.Contains(err.Error(), "db:5432/palmgate") {
		t.Errorf("differing stores: error %v, want one naming the database and both kinds", err)
	}
	for _, want := range []string{"agent/d 2 2 ok", "keys/ES256 1 1 MISMATCH", "palm/h 3 2 MISMATCH",
		`keys/ES256: first difference at key "keys/ES256/k1"`} {
		if !strings.Contains(squeeze(out.String()), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// squeeze turns each run of spaces into one, so that a test need not count the
// table's padding.
func squeeze(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

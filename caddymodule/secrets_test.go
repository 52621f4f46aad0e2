package caddymodule

import (
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestWarnSecretsInConfig: each secret the config holds in clear (a client's
// secret, pairwise_secret, a DSN's password) gets one warning naming the option
// and its safe form, never the value; placeholders and hashes get none
// (issue 18, finding 7).
func TestWarnSecretsInConfig(t *testing.T) {
	const clear = "s3cr3t-value-that-must-not-be-logged-0123456789"
	for _, tc := range []struct {
		name string
		app  App
		want []string // the option field of each warning, in order
		safe []string // each warning's message names these safe forms
	}{
		{name: "nothing configured", app: App{}},
		{name: "client secret", app: App{Clients: []Client{{ID: "app", Secret: clear}}},
			want: []string{"client.secret"}, safe: []string{"secret_hash", "{env.", "{file."}},
		{name: "client secret placeholders", app: App{Clients: []Client{
			{ID: "a", Secret: "{env.APP_SECRET}"}, {ID: "b", Secret: "{file./run/secrets/b}"},
			{ID: "c", SecretHash: "sha256:" + strings.Repeat("ab", 32)}, {ID: "d"},
		}}},
		{name: "two clients, one in clear", app: App{Clients: []Client{{ID: "a", Secret: "{env.A}"}, {ID: "b", Secret: clear}}},
			want: []string{"client.secret"}},
		{name: "pairwise_secret", app: App{PairwiseSecret: clear},
			want: []string{"pairwise_secret"}, safe: []string{"{env.", "{file."}},
		{name: "pairwise_secret placeholder", app: App{PairwiseSecret: "{env.PALMGATE_PAIRWISE_SECRET}"}},
		{name: "pairwise_secret with text around a placeholder", app: App{PairwiseSecret: "x{env.PAIRWISE}"},
			want: []string{"pairwise_secret"}},
		{name: "all three", app: App{
			Clients: []Client{{ID: "app", Secret: clear}}, PairwiseSecret: clear,
			Storage: &StorageConfig{Backend: "postgres", DSN: "postgres://palmgate:" + clear + "@db/palmgate"},
		}, want: []string{"client.secret", "pairwise_secret", "storage.dsn"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entries := warnings(t, &tc.app)
			if len(entries) != len(tc.want) {
				t.Fatalf("%d warnings %v, want %d (%v)", len(entries), entries, len(tc.want), tc.want)
			}
			for i, e := range entries {
				if e.Level != zapcore.WarnLevel {
					t.Errorf("warning %d at level %s", i, e.Level)
				}
				if got := e.ContextMap()["option"]; got != tc.want[i] {
					t.Errorf("warning %d names option %v, want %s", i, got, tc.want[i])
				}
				for _, s := range tc.safe {
					if !strings.Contains(e.Message, s) {
						t.Errorf("warning %q does not name the safe form %s", e.Message, s)
					}
				}
			}
		})
	}
	t.Run("client named", func(t *testing.T) {
		entries := warnings(t, &App{Clients: []Client{{ID: "orders-app", Secret: clear}}})
		if len(entries) != 1 || entries[0].ContextMap()["client_id"] != "orders-app" {
			t.Errorf("warnings %v, want one naming client_id orders-app", entries)
		}
	})
}

// TestWarnDSNPassword: a DSN carrying a password outside placeholders warns, in
// either syntax; one without a password, or with it in a placeholder, does not.
func TestWarnDSNPassword(t *testing.T) {
	for dsn, want := range map[string]bool{
		"postgres://palmgate:hunter2@db.internal:5432/palmgate":              true,
		"postgresql://palmgate:hunter2@db/palmgate?sslmode=verify-full":      true,
		"postgres://palmgate@db/palmgate?password=hunter2":                   true,
		"postgres://palmgate:p%40ss@db/palmgate":                             true,
		"postgres://palmgate:p{a}ss word@db/palmgate":                        true, // unparsable: judged by its text
		"host=db user=palmgate password=hunter2 dbname=palmgate":             true,
		"host=db password = 'hunter 2' dbname=palmgate":                      true,
		"host=db user=palmgate password='' dbname=palmgate password=hunter2": true,
		"{env.PALMGATE_DSN}":                                                    false,
		"{file./run/secrets/dsn}":                                               false,
		"postgres://palmgate:{env.PGPASS}@db/palmgate":                          false,
		"postgres://palmgate@db/palmgate?sslmode=require":                       false,
		"postgres://db/palmgate":                                                false,
		"postgres://palmgate:@db/palmgate":                                      false,
		"host=db user=palmgate password={env.PGPASS} dbname=palmgate":           false,
		"host=db user=palmgate password='{file./run/pgpass}' dbname=palmgate":   false,
		"host=db user=palmgate dbname=palmgate sslmode=verify-full":             false,
		"host=/var/run/postgresql user=palmgate passfile=/etc/palmgate/.pgpass": false,
	} {
		if got := dsnHasPassword(dsn); got != want {
			t.Errorf("dsnHasPassword(%q) = %v, want %v", dsn, got, want)
		}
		app := &App{Storage: &StorageConfig{Backend: "postgres", DSN: dsn}}
		if n := len(warnings(t, app)); (n == 1) != want || n > 1 {
			t.Errorf("%q: %d warnings, want %v", dsn, n, want)
		}
	}
}

// warnings runs warnSecretsInConfig on app and returns what it logged, after
// checking that no entry carries a secret.
func warnings(t *testing.T, app *App) []observer.LoggedEntry {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	app.warnSecretsInConfig(zap.New(core))
	entries := logs.AllUntimed()
	for _, e := range entries {
		text := fmt.Sprintf("%s %v", e.Message, e.ContextMap())
		for _, secret := range []string{"s3cr3t", "hunter", "p%40ss", "p@ss"} {
			if strings.Contains(text, secret) {
				t.Errorf("a warning carries the secret: %s", text)
			}
		}
	}
	return entries
}

// TestPairwiseSecretPlaceholder: pairwise_secret takes a placeholder, the safe
// form the warning names, and is checked once replaced.
func TestPairwiseSecretPlaceholder(t *testing.T) {
	secret := strings.Repeat("p", 40)
	t.Setenv("PALMGATE_TEST_PAIRWISE", secret)
	a := &App{Issuer: "https://id.example.test", Dev: true, PairwiseSecret: "{env.PALMGATE_TEST_PAIRWISE}"}
	a.setDefaults()
	if a.PairwiseSecret != secret {
		t.Fatalf("pairwise_secret %q after setDefaults, want the environment's value", a.PairwiseSecret)
	}
	if err := a.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	t.Setenv("PALMGATE_TEST_PAIRWISE", "short")
	a = &App{Issuer: "https://id.example.test", Dev: true, PairwiseSecret: "{env.PALMGATE_TEST_PAIRWISE}"}
	a.setDefaults()
	if err := a.Validate(); err == nil || !strings.Contains(err.Error(), "pairwise_secret") {
		t.Errorf("Validate with a 5-character pairwise secret: %v, want an error naming pairwise_secret", err)
	}
}

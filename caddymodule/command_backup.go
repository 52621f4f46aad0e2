package caddymodule

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/badgerstore"
	"github.com/palmgate/palmgate/storage/pgstore"
)

// backupUsage and restoreUsage are the synopses of `caddy palmgate backup|restore`.
const (
	backupUsage  = "backup --to <file> [--address <admin>]"
	restoreUsage = "restore --from <file> --storage badger <dir> | --storage postgres <dsn>"
)

// addBackupCommands adds `caddy palmgate backup` (online, through the admin API of a
// running Caddy: admin_backup.go) and `caddy palmgate restore` (offline: it opens the
// target store itself, as migrate does).
func addBackupCommands(parent *cobra.Command) {
	backup := &cobra.Command{
		Use:   backupUsage,
		Short: "Saves a backup of a running palmgate's store to a file (0600), without stopping it",
		Long: `
Takes a backup of the whole store of a running palmgate, through Caddy's admin
API (GET /palmgate/backup), while it keeps serving: one consistent snapshot
(a Badger read transaction, or a REPEATABLE READ transaction on PostgreSQL).
Records that expire keep their expiry instant.

The file is written with mode 0600 beside --to, verified (format, record count,
SHA-256 checksum), and only then renamed to --to, replacing an older backup of
that name: an interrupted or damaged transfer never leaves a file that looks
complete. It holds the signing keys, the pairwise secret and the client
secrets' hashes: keep it as safe as the database (encrypt it at rest).

--to <file>
    Where to save the backup.

Takes --address (the admin API's address, if not the default), or --config and
--adapter to find it, and --json to print the summary as JSON.
`,
		Args: cobra.NoArgs,
	}
	adminFlags(backup)
	backup.Flags().String("to", "", "The file to save the backup to")
	backup.RunE = caddycmd.WrapCommandFuncForCobra(runBackup)
	parent.AddCommand(backup)
	parent.AddCommand(newRestoreCommand())
}

// backupReport is what backup and restore print with --json, or in words.
type backupReport struct {
	File     string    `json:"file"`
	Format   int       `json:"format"`
	Palmgate string    `json:"palmgate"`
	Created  time.Time `json:"created"`
	Backend  string    `json:"backend,omitempty"`
	Records  int       `json:"records"`
	SHA256   string    `json:"sha256"`
	Restored *int      `json:"restored,omitempty"`
}

func newReport(file string, sum storage.BackupSummary) backupReport {
	return backupReport{File: file, Format: sum.Format, Palmgate: sum.Header.Palmgate, Created: sum.Header.Created,
		Backend: sum.Header.Backend, Records: sum.Records, SHA256: hex.EncodeToString(sum.SHA256[:])}
}

func runBackup(fs caddycmd.Flags) (int, error) {
	to := fs.String("to")
	if to == "" {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("--to is required; usage: caddy palmgate %s", backupUsage)
	}
	sum, err := saveBackup(fs, to)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	report := newReport(to, sum)
	if fs.Bool("json") {
		return caddy.ExitCodeSuccess, json.NewEncoder(os.Stdout).Encode(report)
	}
	fmt.Printf("Saved a backup of %d records to %s (format %d, palmgate %s, taken %s from %s; SHA-256 %s).\n",
		report.Records, to, report.Format, report.Palmgate, report.Created.Format(time.RFC3339), report.Backend, report.SHA256)
	return caddy.ExitCodeSuccess, nil
}

// saveBackup downloads the backup into a temporary file (0600) beside to, verifies
// it and renames it to to.
func saveBackup(fs caddycmd.Flags, to string) (storage.BackupSummary, error) {
	var sum storage.BackupSummary
	tmp, err := os.CreateTemp(filepath.Dir(to), "."+filepath.Base(to)+".*.partial")
	if err != nil {
		return sum, fmt.Errorf("--to: %w", err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return sum, fmt.Errorf("--to: %w", err)
	}
	resp, err := adminAPIResponse(fs, "GET", "/palmgate/backup", nil)
	if err != nil {
		return sum, fmt.Errorf("taking the backup: %w", err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(tmp, resp.Body); err != nil {
		return sum, fmt.Errorf("the backup was cut off (nothing saved; see the palmgate's log): %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return sum, fmt.Errorf("--to: %w", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return sum, err
	}
	if sum, err = storage.VerifyBackup(context.Background(), tmp); err != nil {
		return sum, fmt.Errorf("the backup received is not valid (nothing saved; see the palmgate's log): %w", err)
	}
	if err := tmp.Close(); err != nil {
		return sum, fmt.Errorf("--to: %w", err)
	}
	if err := os.Rename(tmp.Name(), to); err != nil {
		return sum, fmt.Errorf("--to: %w", err)
	}
	done = true
	if dir, err := os.Open(filepath.Dir(to)); err == nil { // make the rename durable
		dir.Sync()
		dir.Close()
	}
	return sum, nil
}

// newRestoreCommand is `caddy palmgate restore`. --storage takes two values, which
// pflag cannot express, so it parses its arguments itself (parseRestoreArgs).
func newRestoreCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   restoreUsage,
		Short: "Restores a backup into an empty store (offline)",
		Long: `
Restores a backup made by 'caddy palmgate backup' into an empty store, which it
opens itself: no palmgate may run on it meanwhile (Badger locks its directory;
on PostgreSQL, start palmgate only after the restore). Then start palmgate with
the same issuer and "storage" option.

It first reads the whole file and verifies it (format version, framing, record
count, SHA-256 checksum) without opening the target: a truncated, damaged or
altered file is refused and nothing is written. It then imports the records
all or nothing (one transaction on PostgreSQL; on Badger, batches that are
dropped again on any error), each with its expiry instant; records that have
expired since the backup are left out.

--from <file>
    The backup file.

--storage badger <dir> | --storage postgres <dsn>
    The target, in the forms of the global option's "storage": a Badger
    directory (created if missing; by default palmgate/ under Caddy's data
    directory) or a PostgreSQL DSN. Placeholders such as {env.PALMGATE_DSN}
    are replaced, so a password need not be on the command line. The store must
    hold no palmgate record: a non-empty one is refused and left as it was.
`,
		DisableFlagParsing: true,
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return caddycmd.WrapCommandFuncForCobra(func(caddycmd.Flags) (int, error) {
			from, target, asJSON, help, err := parseRestoreArgs(args)
			if help {
				return caddy.ExitCodeSuccess, cmd.Help()
			}
			if err != nil {
				return caddy.ExitCodeFailedStartup, fmt.Errorf("%w; usage: caddy palmgate %s", err, restoreUsage)
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			report, err := runRestore(ctx, from, target)
			if err != nil {
				return caddy.ExitCodeFailedStartup, err
			}
			if asJSON {
				return caddy.ExitCodeSuccess, json.NewEncoder(os.Stdout).Encode(report)
			}
			fmt.Printf("Restored %d of the %d records of %s (taken %s by palmgate %s from %s); %d had expired since.\n",
				*report.Restored, report.Records, from, report.Created.Format(time.RFC3339), report.Palmgate, report.Backend,
				report.Records-*report.Restored)
			return caddy.ExitCodeSuccess, nil
		})(cmd, args)
	}
	return cmd
}

// parseRestoreArgs reads `--from <file> --storage <backend> <location> [--json]` in
// any order (`--from=<file>` and `--storage=<backend> <location>` too). Errors never
// repeat a location, which may be a DSN with a password.
func parseRestoreArgs(args []string) (from string, target migrateEnd, asJSON, help bool, err error) {
	for _, arg := range args {
		if arg == "-h" || arg == "--help" {
			return "", target, false, true, nil
		}
	}
	seen := map[string]bool{}
	for i := 0; i < len(args); i++ {
		name, value, inline := strings.Cut(args[i], "=")
		if seen[name] {
			return "", target, false, false, fmt.Errorf("%s given twice", name)
		}
		seen[name] = true
		missing := func(n int) bool {
			if i+n >= len(args) {
				return true
			}
			for _, a := range args[i+1 : i+n+1] {
				if strings.HasPrefix(a, "--") {
					return true
				}
			}
			return false
		}
		switch name {
		case "--json":
			asJSON = true
		case "--from":
			if !inline {
				if missing(1) {
					return "", target, false, false, errors.New("--from needs a file")
				}
				i++
				value = args[i]
			}
			from = value
		case "--storage":
			want := 2
			if inline {
				want = 1
			}
			if missing(want) {
				return "", target, false, false, errors.New("--storage needs a backend and a location, as in --storage badger <dir> or --storage postgres <dsn>")
			}
			if !inline {
				i++
				value = args[i]
			}
			i++
			target = migrateEnd{backend: value, location: args[i]}
		default:
			if strings.HasPrefix(name, "-") {
				return "", target, false, false, fmt.Errorf("unknown flag %q", name)
			}
			return "", target, false, false, fmt.Errorf("unexpected argument %d (not after --from or --storage)", i+1)
		}
	}
	switch {
	case from == "" || !seen["--storage"]:
		return "", target, false, false, errors.New("both --from and --storage are required")
	case target.backend != "badger" && target.backend != "postgres":
		return "", target, false, false, fmt.Errorf("--storage %q: unknown backend (badger or postgres)", target.backend)
	}
	return from, target, asJSON, false, nil
}

// restoreTarget is a store a backup can be restored into.
type restoreTarget interface {
	storage.Store
	storage.Importer
}

// runRestore verifies the backup in from, then restores it into target.
func runRestore(ctx context.Context, from string, target migrateEnd) (backupReport, error) {
	f, err := os.Open(from)
	if err != nil {
		return backupReport{}, fmt.Errorf("--from: %w", err)
	}
	defer f.Close()
	sum, err := storage.VerifyBackup(ctx, f)
	if err != nil {
		return backupReport{}, fmt.Errorf("refusing to restore %s (nothing was written): %w", from, err)
	}
	report := newReport(from, sum)
	dst, name, err := openRestoreTarget(ctx, target)
	if err != nil {
		return report, err
	}
	defer dst.Close()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return report, fmt.Errorf("--from: %w", err)
	}
	// The import checks the file again as it reads it (it could have changed since)
	// and keeps nothing unless all of it was right.
	n, err := dst.Import(ctx, storage.BackupExporter(f))
	if errors.Is(err, storage.ErrNotEmpty) {
		return report, fmt.Errorf("refusing to restore: %s already holds palmgate records, and nothing was written to it; "+
			"restore only into a new, empty store", name)
	}
	if err != nil {
		return report, fmt.Errorf("restoring into %s (nothing was kept): %w", name, err)
	}
	report.Restored = &n
	return report, nil
}

// openRestoreTarget opens the store target names and returns it with a name for
// messages (never a DSN, which may hold a password).
func openRestoreTarget(ctx context.Context, target migrateEnd) (restoreTarget, string, error) {
	repl := caddy.NewReplacer()
	location := repl.ReplaceKnown(target.location, "")
	if target.backend == "postgres" {
		if location == "" {
			return nil, "", errors.New("--storage postgres: the DSN is empty (an unset environment variable in a placeholder?)")
		}
		s, err := pgstore.Open(ctx, pgstore.Config{DSN: location, SweepInterval: -1, Logger: caddy.Log().Named("palmgate.restore")})
		if err != nil {
			return nil, "", fmt.Errorf("--storage postgres: %w", err)
		}
		return s, "the PostgreSQL database " + s.Database(), nil
	}
	dir, err := filepath.Abs(location)
	if err != nil {
		return nil, "", fmt.Errorf("--storage badger: %w", err)
	}
	// A directory with files but no Badger store in it is most likely a mistake.
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); err != nil {
			return nil, "", fmt.Errorf("--storage badger: %s holds files but no Badger store; give a new or empty directory", dir)
		}
	}
	s, err := badgerstore.Open(dir, nil)
	if errors.Is(err, badgerstore.ErrLocked) {
		return nil, "", fmt.Errorf("--storage badger: the store at %s is in use, most likely by a running palmgate: "+
			"restore into a new directory, with palmgate stopped", dir)
	}
	if err != nil {
		return nil, "", fmt.Errorf("--storage badger: %w", err)
	}
	return s, "the Badger store at " + dir, nil
}

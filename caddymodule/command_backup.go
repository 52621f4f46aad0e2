package caddymodule

import (
	"bytes"
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
	backupUsage  = "backup --to <file> [--key-file <file>] [--address <admin>]"
	restoreUsage = "restore --from <file> [--key-file <file>] --storage badger <dir> | --storage postgres <dsn>"
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

--key-file <file>
    A file holding a secret key (at least 16 bytes; surrounding whitespace is
    ignored), for example made by 'head -c 32 /dev/urandom | base64 > backup.key'.
    The backup then ends with an HMAC-SHA256 under it instead of a SHA-256, so
    that whoever can write where backups are kept but lacks the key cannot alter
    one undetected; restore needs the same --key-file. Keep the key apart from
    the backups.

Takes --address (the admin API's address, if not the default), or --config and
--adapter to find it, and --json to print the summary as JSON.
`,
		Args: cobra.NoArgs,
	}
	adminFlags(backup)
	backup.Flags().String("to", "", "The file to save the backup to")
	backup.Flags().String("key-file", "", "A file holding a key to authenticate the backup with (HMAC-SHA256)")
	backup.RunE = plainCommand(runBackup)
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
	MAC      string    `json:"mac,omitempty"`
	Records  int       `json:"records"`
	Checksum string    `json:"checksum"`
	Restored *int      `json:"restored,omitempty"`
}

func newReport(file string, sum storage.BackupSummary) backupReport {
	return backupReport{File: file, Format: sum.Format, Palmgate: sum.Header.Palmgate, Created: sum.Header.Created,
		Backend: sum.Header.Backend, MAC: sum.Header.MAC, Records: sum.Records, Checksum: hex.EncodeToString(sum.SHA256[:])}
}

func runBackup(fs caddycmd.Flags) (int, error) {
	to := fs.String("to")
	if to == "" {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("--to is required; usage: caddy palmgate %s", backupUsage)
	}
	var b storage.Backup
	if f := fs.String("key-file"); f != "" {
		key, err := readBackupKey(f)
		if err != nil {
			return caddy.ExitCodeFailedStartup, err
		}
		b.Key = key
	}
	sum, err := saveBackup(fs, to, b)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	report := newReport(to, sum)
	if fs.Bool("json") {
		return caddy.ExitCodeSuccess, json.NewEncoder(os.Stdout).Encode(report)
	}
	check := "SHA-256"
	if report.MAC != "" {
		check = "HMAC-SHA256 under the key"
	}
	fmt.Printf("Saved a backup of %d records to %s (format %d, palmgate %s, taken %s from %s; %s %s).\n",
		report.Records, to, report.Format, report.Palmgate, report.Created.Format(time.RFC3339), report.Backend, check, report.Checksum)
	return caddy.ExitCodeSuccess, nil
}

// readBackupKey reads the key of --key-file. Errors never show it.
func readBackupKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--key-file: %w", err)
	}
	key := bytes.TrimSpace(b)
	if len(key) < 16 {
		return nil, fmt.Errorf("--key-file: %s holds %d bytes; a key needs at least 16 (make one with: head -c 32 /dev/urandom | base64 > %s)",
			path, len(key), path)
	}
	return key, nil
}

// tempBeside creates an empty file, mode 0600, in the directory of to, and a
// function that removes it unless kept.
func tempBeside(to string) (*os.File, func(keep bool), error) {
	tmp, err := os.CreateTemp(filepath.Dir(to), "."+filepath.Base(to)+".*.partial")
	if err != nil {
		return nil, nil, fmt.Errorf("--to: %w", err)
	}
	cleanup := func(keep bool) {
		tmp.Close()
		if !keep {
			os.Remove(tmp.Name())
		}
	}
	if err := tmp.Chmod(0o600); err != nil {
		cleanup(false)
		return nil, nil, fmt.Errorf("--to: %w", err)
	}
	return tmp, cleanup, nil
}

// saveBackup downloads the backup into a temporary file (0600) beside to and
// verifies it; with a key (b.Key), it writes it again into another, with the HMAC,
// and verifies that one with the key. Then it renames the file to to.
func saveBackup(fs caddycmd.Flags, to string, b storage.Backup) (storage.BackupSummary, error) {
	var sum storage.BackupSummary
	tmp, cleanup, err := tempBeside(to)
	if err != nil {
		return sum, err
	}
	done := false
	defer func() { cleanup(done) }()
	resp, err := adminAPIResponse(fs, "GET", "/palmgate/backup", nil, "application/octet-stream")
	if err != nil {
		return sum, err // it names the admin API's address and the fix
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
	if len(b.Key) > 0 {
		keyed, cleanupKeyed, err := tempBeside(to)
		if err != nil {
			return sum, err
		}
		if sum, err = writeKeyed(tmp, keyed, sum.Header, b); err != nil {
			cleanupKeyed(false)
			return sum, err
		}
		cleanup(false)
		tmp, cleanup = keyed, cleanupKeyed
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

// writeKeyed writes the verified backup in plain, with its header, into keyed with
// b's key, and verifies the result.
func writeKeyed(plain, keyed *os.File, header storage.BackupHeader, b storage.Backup) (storage.BackupSummary, error) {
	ctx := context.Background()
	if _, err := plain.Seek(0, io.SeekStart); err != nil {
		return storage.BackupSummary{}, err
	}
	if _, err := b.Write(ctx, keyed, storage.BackupExporter(plain), header); err != nil {
		return storage.BackupSummary{}, fmt.Errorf("writing the backup with the key (nothing saved): %w", err)
	}
	if err := keyed.Sync(); err != nil {
		return storage.BackupSummary{}, fmt.Errorf("--to: %w", err)
	}
	if _, err := keyed.Seek(0, io.SeekStart); err != nil {
		return storage.BackupSummary{}, err
	}
	sum, err := b.Verify(ctx, keyed)
	if err != nil {
		return sum, fmt.Errorf("the backup written with the key is not valid (nothing saved): %w", err)
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

--key-file <file>
    The key the backup was made with (backup --key-file). A backup made with a
    key is refused without it, and one made without a key is refused with one.

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
		return plainCommand(func(caddycmd.Flags) (int, error) {
			a, help, err := parseRestoreArgs(args)
			if help {
				return caddy.ExitCodeSuccess, cmd.Help()
			}
			if err != nil {
				return caddy.ExitCodeFailedStartup, fmt.Errorf("%w; usage: caddy palmgate %s", err, restoreUsage)
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			var b storage.Backup
			if a.keyFile != "" {
				if b.Key, err = readBackupKey(a.keyFile); err != nil {
					return caddy.ExitCodeFailedStartup, err
				}
			}
			report, err := runRestore(ctx, a.from, a.target, b)
			if err != nil {
				return caddy.ExitCodeFailedStartup, err
			}
			if a.asJSON {
				return caddy.ExitCodeSuccess, json.NewEncoder(os.Stdout).Encode(report)
			}
			fmt.Printf("Restored %d of the %d records of %s (taken %s by palmgate %s from %s); %d had expired since.\n",
				*report.Restored, report.Records, a.from, report.Created.Format(time.RFC3339), report.Palmgate, report.Backend,
				report.Records-*report.Restored)
			return caddy.ExitCodeSuccess, nil
		})(cmd, args)
	}
	return cmd
}

// restoreArgs are the arguments of `caddy palmgate restore`.
type restoreArgs struct {
	from, keyFile string
	target        migrateEnd
	asJSON        bool
}

// parseRestoreArgs reads `--from <file> [--key-file <file>] --storage <backend>
// <location> [--json]` in any order (`--from=<file>`, `--key-file=<file>` and
// `--storage=<backend> <location>` too). Errors never repeat a location, which may
// be a DSN with a password.
func parseRestoreArgs(args []string) (a restoreArgs, help bool, err error) {
	for _, arg := range args {
		if arg == "-h" || arg == "--help" {
			return a, true, nil
		}
	}
	seen := map[string]bool{}
	for i := 0; i < len(args); i++ {
		name, value, inline := strings.Cut(args[i], "=")
		if seen[name] {
			return restoreArgs{}, false, fmt.Errorf("%s given twice", name)
		}
		seen[name] = true
		// missing reports that fewer than n values follow the flag.
		missing := func(n int) bool {
			if i+n >= len(args) {
				return true
			}
			for _, v := range args[i+1 : i+n+1] {
				if strings.HasPrefix(v, "--") {
					return true
				}
			}
			return false
		}
		switch name {
		case "--json":
			a.asJSON = true
		case "--from", "--key-file":
			if !inline {
				if missing(1) {
					return restoreArgs{}, false, fmt.Errorf("%s needs a file", name)
				}
				i++
				value = args[i]
			}
			if name == "--from" {
				a.from = value
			} else {
				a.keyFile = value
			}
		case "--storage":
			want := 2
			if inline {
				want = 1
			}
			if missing(want) {
				return restoreArgs{}, false, errors.New("--storage needs a backend and a location, as in --storage badger <dir> or --storage postgres <dsn>")
			}
			if !inline {
				i++
				value = args[i]
			}
			i++
			a.target = migrateEnd{backend: value, location: args[i]}
		default:
			if strings.HasPrefix(name, "-") {
				return restoreArgs{}, false, fmt.Errorf("unknown flag %q", name)
			}
			return restoreArgs{}, false, fmt.Errorf("unexpected argument %d (not after --from, --key-file or --storage)", i+1)
		}
	}
	switch {
	case a.from == "" || !seen["--storage"]:
		return restoreArgs{}, false, errors.New("both --from and --storage are required")
	case a.target.backend != "badger" && a.target.backend != "postgres":
		return restoreArgs{}, false, fmt.Errorf("--storage %q: unknown backend (badger or postgres)", a.target.backend)
	}
	return a, false, nil
}

// restoreTarget is a store a backup can be restored into.
type restoreTarget interface {
	storage.Store
	storage.Importer
}

// runRestore verifies the backup in from, then restores it into target.
func runRestore(ctx context.Context, from string, target migrateEnd, b storage.Backup) (backupReport, error) {
	f, err := os.Open(from)
	if err != nil {
		return backupReport{}, fmt.Errorf("--from: %w", err)
	}
	defer f.Close()
	sum, err := b.Verify(ctx, f)
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
	n, err := dst.Import(ctx, b.Exporter(f))
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

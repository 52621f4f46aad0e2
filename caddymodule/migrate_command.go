package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/palmgate/palmgate/core/records"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/badgerstore"
	"github.com/palmgate/palmgate/storage/pgstore"
)

// migrateUsage is the synopsis of `caddy palmgate migrate`.
const migrateUsage = "migrate --from badger <dir> --to postgres <dsn>"

// expiryMargin is the margin of storage.Compare: a record found in one store only
// that expires within it is taken as having expired during the copy. It covers the
// time between the two stores' reads of a record and a difference between this
// machine's clock and the database server's.
const expiryMargin = time.Minute

// newMigrateCommand is `caddy palmgate migrate`. Its flags take two values each
// (`--from badger <dir>`), which pflag cannot express, so it parses its arguments
// itself (parseMigrateArgs).
func newMigrateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   migrateUsage,
		Short: "Copies a stopped palmgate's Badger store into an empty PostgreSQL database",
		Long: `
Copies every record of palmgate's Badger store into an empty PostgreSQL
database, each with its remaining lifetime, then reads both back and compares
them kind by kind (the first two slash-separated segments of the keys): record
counts and SHA-256 checksums over keys, values and expiry times. It prints one
line per kind and exits non-zero when anything differs.

--from badger <dir>
    The Badger directory: the path of "storage badger <dir>", by default
    palmgate/ under Caddy's data directory. Stop the palmgate (caddy) running
    on it first: Badger locks its directory while it is open.

--to postgres <dsn>
    The PostgreSQL database, as in "storage postgres <dsn>": a postgres:// URL
    or key=value pairs. Placeholders such as {env.PALMGATE_DSN} are replaced, so
    the password need not be on the command line (where ps shows it). The
    database must hold no palmgate record: a non-empty one is refused and left
    as it was. The copy is one transaction: on any error, nothing is written.

Records expired in Badger are not copied. A record that expires while the
stores are compared is left out of the comparison (see the README).
`,
		// --from and --to take two values each: parsed by parseMigrateArgs.
		DisableFlagParsing: true,
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return plainCommand(func(caddycmd.Flags) (int, error) {
			from, to, help, err := parseMigrateArgs(args)
			if help {
				return caddy.ExitCodeSuccess, cmd.Help()
			}
			if err != nil {
				return caddy.ExitCodeFailedStartup, fmt.Errorf("%w; usage: caddy palmgate %s", err, migrateUsage)
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			if err := runMigrate(ctx, from, to, os.Stdout); err != nil {
				return caddy.ExitCodeFailedStartup, err
			}
			return caddy.ExitCodeSuccess, nil
		})(cmd, args)
	}
	return cmd
}

// migrateEnd is one side of a migration: a backend name and where its data is.
type migrateEnd struct {
	backend  string
	location string
}

// parseMigrateArgs reads `--from <backend> <location> --to <backend> <location>`, in
// either order; `--from=<backend> <location>` works too. help reports -h or --help.
// Errors never repeat a location, which may be a DSN with a password.
func parseMigrateArgs(args []string) (from, to migrateEnd, help bool, err error) {
	for _, arg := range args {
		if arg == "-h" || arg == "--help" {
			return from, to, true, nil
		}
	}
	seen := map[string]bool{}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		name, backend, inline := strings.Cut(arg, "=")
		switch name {
		case "--from", "--to":
		default:
			if strings.HasPrefix(arg, "-") {
				return from, to, false, fmt.Errorf("unknown flag %q", name)
			}
			return from, to, false, fmt.Errorf("unexpected argument %d (not after --from or --to)", i+1)
		}
		if seen[name] {
			return from, to, false, fmt.Errorf("%s given twice", name)
		}
		seen[name] = true
		want := 2 // backend and location
		if inline {
			want = 1
		}
		if i+want >= len(args) || strings.HasPrefix(args[i+1], "--") || (want == 2 && strings.HasPrefix(args[i+2], "--")) {
			return from, to, false, fmt.Errorf("%s needs a backend and a location, as in %s", name, map[string]string{
				"--from": "--from badger <dir>", "--to": "--to postgres <dsn>"}[name])
		}
		if !inline {
			i++
			backend = args[i]
		}
		i++
		end := migrateEnd{backend: backend, location: args[i]}
		if name == "--from" {
			from = end
		} else {
			to = end
		}
	}
	switch {
	case !seen["--from"] || !seen["--to"]:
		return from, to, false, errors.New("both --from and --to are required")
	case from.backend != "badger":
		return from, to, false, fmt.Errorf("--from %q: only badger can be migrated from", from.backend)
	case to.backend != "postgres":
		return from, to, false, fmt.Errorf("--to %q: only postgres can be migrated to", to.backend)
	}
	return from, to, false, nil
}

// runMigrate copies the Badger store of from into the PostgreSQL database of to,
// verifies the copy and writes its report to out.
func runMigrate(ctx context.Context, from, to migrateEnd, out io.Writer) error {
	repl := caddy.NewReplacer()
	dir := repl.ReplaceKnown(from.location, "")
	dsn := repl.ReplaceKnown(to.location, "")
	if dsn == "" {
		return errors.New("--to postgres: the DSN is empty (an unset environment variable in a placeholder?)")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("--from badger: %w", err)
	}
	// badgerstore.Open would create an empty store where there is none.
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); err != nil {
		return fmt.Errorf("--from badger: %s is not a Badger store (%w); give the directory of `storage badger <dir>`, by default %s",
			dir, err, filepath.Join(caddy.AppDataDir(), "palmgate"))
	}
	src, err := badgerstore.Open(dir, nil)
	if errors.Is(err, badgerstore.ErrLocked) {
		return fmt.Errorf("--from badger: the store at %s is in use, most likely by a running palmgate: stop it first "+
			"(Badger locks its directory while it is open, and a copy of a running store would miss its later writes)", dir)
	}
	if err != nil {
		return fmt.Errorf("--from badger: %w", err)
	}
	defer src.Close()
	dst, err := pgstore.Open(ctx, pgstore.Config{DSN: dsn, SweepInterval: -1, Logger: caddy.Log().Named("palmgate.migrate")})
	if err != nil {
		return fmt.Errorf("--to postgres: %w", err)
	}
	defer dst.Close()

	fmt.Fprintf(out, "Copying the Badger store at %s to PostgreSQL at %s...\n", dir, dst.Database())
	began := time.Now()
	n, err := dst.Import(ctx, src)
	if errors.Is(err, storage.ErrNotEmpty) {
		return fmt.Errorf("refusing to migrate: the PostgreSQL database %s already holds palmgate records, and nothing was written to it; "+
			"migrate only into a database no palmgate has used", dst.Database())
	}
	if err != nil {
		return fmt.Errorf("copying (nothing was written to PostgreSQL): %w", err)
	}
	fmt.Fprintf(out, "Copied %d records in %v. Verifying...\n", n, time.Since(began).Round(time.Millisecond))

	began = time.Now()
	cmp, err := storage.Compare(ctx, src, dst, expiryMargin, records.Kind)
	if err != nil {
		return fmt.Errorf("verifying the copy (the %d records copied stay in PostgreSQL): %w", n, err)
	}
	if err := reportComparison(out, cmp, dst.Database()); err != nil {
		return err
	}
	fmt.Fprintf(out, "Verified in %v.\nStart palmgate with `storage postgres <dsn>`; keep %s until you no longer need to go back.\n",
		time.Since(began).Round(time.Millisecond), dir)
	return nil
}

// reportComparison writes the table of cmp (one line per kind: its records in each
// store and whether the checksums agree) and a summary to out, and returns an error
// naming the kinds that differ, if any.
func reportComparison(out io.Writer, cmp storage.Comparison, database string) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "KIND\tBADGER\tPOSTGRES\tCHECKSUM")
	var bad []string
	records, expired := 0, 0
	for _, k := range cmp {
		sum := "ok"
		if !k.OK() {
			sum = "MISMATCH"
			bad = append(bad, k.Kind)
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", k.Kind, k.Source, k.Target, sum)
		records += k.Source
		expired += k.Expired
	}
	w.Flush()
	if len(bad) > 0 {
		for _, k := range cmp {
			if k.FirstDifference != nil {
				fmt.Fprintf(out, "%s: first difference at key %.80q\n", k.Kind, k.FirstDifference)
			}
		}
		return fmt.Errorf("verification failed: the copy in PostgreSQL at %s differs from the Badger store in %d kinds (%s); "+
			"do not run palmgate on it: drop its tables palmgate_kv and palmgate_schema and migrate again",
			database, len(bad), strings.Join(bad, ", "))
	}
	fmt.Fprintf(out, "%d records of %d kinds are the same in both stores", records, len(cmp))
	if expired > 0 {
		fmt.Fprintf(out, " (%d that expired during the copy were left out)", expired)
	}
	fmt.Fprintln(out, ".")
	return nil
}

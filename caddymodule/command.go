package caddymodule

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/palmgate/palmgate/core/oidc"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "palmgate",
		Usage: "hash-secret [--plaintext <secret>] [--algorithm <argon2id|sha256>] | client ... | keys list|rotate | " + migrateUsage + " | " + backupUsage + " | restore ... | agent remove ... | version | keygen | scan ...",
		Short: "palmgate tools (hash-secret: hash a client secret for secret_hash; client add|list|show|update|rotate-secret|remove; keys list|rotate; migrate: Badger to PostgreSQL; backup, restore; agent remove; version; keygen, scan: test without the palm app)",
		Long: `
palmgate's command-line tools.

  caddy palmgate hash-secret [--plaintext <secret>] [--algorithm <argon2id|sha256>]
  caddy palmgate ` + migrateUsage + `
  caddy palmgate ` + backupUsage + `
  caddy palmgate ` + restoreUsage + `
  caddy palmgate client add --name <name> --redirect-uri <uri> [--redirect-uri <uri>...] [--sector <id>] [--json]
  caddy palmgate client list|show <id>|update <id> ...|rotate-secret <id> [--grace 24h]|remove <id>
  caddy palmgate portal end-sessions <owner> [--json]
  caddy palmgate version
  caddy palmgate keygen [--p256] [--out <file>] [--name <attestor name>]
  caddy palmgate scan <scan-url> --key <private key file> --attestor <name> --subject <id> [--deny]
  caddy palmgate keys list|rotate [--alg RS256|ES256|EdDSA] [--json]
  caddy palmgate agent remove <deviceId> [--json]
  caddy palmgate human end-sessions <humanId> [--revoke-grants] [--json]
  caddy palmgate human find --client-id <client_id> --sub <sub> [--json]
`,
		CobraFunc: func(cmd *cobra.Command) {
			hash := &cobra.Command{
				Use:   "hash-secret [--plaintext <secret>] [--algorithm <argon2id|sha256>]",
				Short: "Hashes a client secret for a client block's secret_hash",
				Long: `
Hashes an OpenID Connect client secret and prints the encoded hash, for the
secret_hash option of a palmgate client block, so that Caddy's config (the admin
API, autosave.json) never holds the secret in clear.

--plaintext
    The secret to hash. If omitted, it is read from stdin (one line); on a
    terminal, twice and without echo.

--algorithm
    argon2id (default): $argon2id$v=19$m=47104,t=1,p=1$<salt>$<hash>, a random
      salt; right for any secret.
    sha256: sha256:<64 hex digits>, no salt; only for long random secrets
      (such as 32 random bytes), which it verifies faster.
`,
				Args: cobra.NoArgs,
			}
			hash.Flags().StringP("plaintext", "p", "", "The secret to hash")
			hash.Flags().StringP("algorithm", "a", "argon2id", "Hash algorithm: argon2id or sha256")
			hash.RunE = plainCommand(cmdHashSecret)
			cmd.AddCommand(hash)
			cmd.AddCommand(newMigrateCommand())
			addClientCommands(cmd)
			addPortalCommands(cmd)
			addHumanCommands(cmd)
			addToolCommands(cmd)
			addBackupCommands(cmd)
			addAgentCommands(cmd)
			addKeysCommands(cmd)
			plainTree(cmd)
		},
	})
}

func cmdHashSecret(fs caddycmd.Flags) (int, error) {
	secret := fs.String("plaintext")
	if secret == "" {
		var err error
		if secret, err = readSecret(); err != nil {
			return caddy.ExitCodeFailedStartup, err
		}
	}
	if secret == "" {
		return caddy.ExitCodeFailedStartup, errors.New("the secret is empty")
	}
	encoded, err := oidc.HashSecret(secret, fs.String("algorithm"))
	if err != nil {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("--algorithm: %w", err)
	}
	fmt.Println(encoded)
	return caddy.ExitCodeSuccess, nil
}

// readSecret reads the secret from the terminal (twice, without echo) or one line
// of stdin.
func readSecret() (string, error) {
	fd := int(os.Stdin.Fd())
	if !term.IsTerminal(fd) {
		line, err := bufio.NewReader(os.Stdin).ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("reading the secret from stdin: %w", err)
		}
		if trimmed, ok := bytes.CutSuffix(line, []byte("\n")); ok {
			line = bytes.TrimSuffix(trimmed, []byte("\r"))
		}
		return string(line), nil
	}
	// Restore the terminal's echo on Ctrl-C.
	state, _ := term.GetState(fd)
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt)
	defer signal.Stop(c)
	go func() {
		if _, ok := <-c; ok {
			_ = term.Restore(fd, state)
			os.Exit(caddy.ExitCodeFailedStartup)
		}
	}()
	fmt.Fprint(os.Stderr, "Enter secret: ")
	secret, err := term.ReadPassword(fd)
	fmt.Fprintln(os.Stderr)
	if err != nil {
		return "", err
	}
	fmt.Fprint(os.Stderr, "Confirm secret: ")
	again, err := term.ReadPassword(fd)
	fmt.Fprintln(os.Stderr)
	if err != nil {
		return "", err
	}
	if !bytes.Equal(secret, again) {
		return "", errors.New("the secrets do not match")
	}
	return string(secret), nil
}

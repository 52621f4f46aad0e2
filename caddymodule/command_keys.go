package caddymodule

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"text/tabwriter"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

// addKeysCommands adds `caddy palmgate keys list|rotate`, which call the admin API
// of a running Caddy (admin_keys.go).
func addKeysCommands(parent *cobra.Command) {
	keysCmd := &cobra.Command{
		Use:   "keys list|rotate",
		Short: "Lists and rotates the token signing keys through the admin API of a running Caddy",
		Long: `
Lists and rotates palmgate's token signing keys (RS256, ES256, EdDSA) on a running
Caddy, through its admin API. A rotated key is retired: it stays in the JWKS until
every token it signed has expired, then it is dropped. Every instance on the store
uses the new key within seconds.

Every subcommand takes --address (the admin API's address, if not the default),
or --config and --adapter to find it, and --json to print JSON instead of a table.
`,
	}
	list := &cobra.Command{Use: "list", Short: "Lists the signing keys: active or retired, and when each rotates or drops", Args: cobra.NoArgs}
	adminFlags(list)
	list.RunE = plainCommand(runKeysList)
	rotate := &cobra.Command{Use: "rotate [--alg RS256|ES256|EdDSA]",
		Short: "Makes new signing keys active (every algorithm, or --alg's); the old ones are retired", Args: cobra.NoArgs}
	adminFlags(rotate)
	rotate.Flags().String("alg", "", "Rotate only this algorithm's key: RS256, ES256 or EdDSA")
	rotate.RunE = plainCommand(runKeysRotate)
	keysCmd.AddCommand(list, rotate)
	parent.AddCommand(keysCmd)
}

func runKeysList(fs caddycmd.Flags) (int, error) {
	list, printed, err := adminQuery[adminKeyList](fs, http.MethodGet, "/palmgate/keys", nil)
	if err != nil || printed {
		return exitCode(err), err
	}
	fmt.Printf("key_rotation: %s\n", list.KeyRotation)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KID\tALG\tSTATE\tCREATED\tRETIRED\tDROPS\tROTATES")
	for _, k := range list.Keys {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.KID, k.Alg, k.State, k.Created,
			orDash(k.RetiredAt), orDash(k.DropsAt), orDash(k.RotatesAt))
	}
	return caddy.ExitCodeSuccess, tw.Flush()
}

func runKeysRotate(fs caddycmd.Flags) (int, error) {
	var body any
	if alg := fs.String("alg"); alg != "" {
		body = map[string]string{"alg": alg}
	}
	rotated, printed, err := adminQuery[struct {
		Active map[string]string `json:"active"`
	}](fs, http.MethodPost, "/palmgate/keys/rotate", body)
	if err != nil || printed {
		return exitCode(err), err
	}
	algs := make([]string, 0, len(rotated.Active))
	for alg := range rotated.Active {
		algs = append(algs, alg)
	}
	slices.Sort(algs)
	for _, alg := range algs {
		fmt.Printf("rotated %s: the active key is now %s\n", alg, rotated.Active[alg])
	}
	return caddy.ExitCodeSuccess, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

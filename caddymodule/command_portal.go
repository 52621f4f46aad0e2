package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

// addPortalCommands adds `caddy palmgate portal end-sessions <owner>`, which calls
// the admin API of a running Caddy (admin_portal.go).
func addPortalCommands(parent *cobra.Command) {
	portalCmd := &cobra.Command{
		Use:   "portal end-sessions <owner>",
		Short: "Manages the developer portal through the admin API of a running Caddy",
	}
	end := &cobra.Command{
		Use:   "end-sessions <owner>",
		Short: "Signs a developer out of the portal everywhere",
		Long: `
Ends every developer portal session of one developer, on every instance on the
store at once: their browsers are signed out and must sign in again (with a palm
scan). The developer is named by the "owner" the admin API shows on their
applications (GET /palmgate/clients, or 'caddy palmgate client show <client_id>
--json').

Takes --address (the admin API's address, if not the default), or --config and
--adapter to find it, and --json to print the admin API's JSON answer.
`,
		Args: cobra.ExactArgs(1),
	}
	adminFlags(end)
	end.RunE = plainCommand(runEndSessions)
	portalCmd.AddCommand(end)
	parent.AddCommand(portalCmd)
}

func runEndSessions(fs caddycmd.Flags) (int, error) {
	out, err := callAdminAPI(fs, http.MethodDelete, "/palmgate/portal/sessions/"+url.PathEscape(fs.Arg(0)), nil)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	if fs.Bool("json") {
		os.Stdout.Write(out)
		return caddy.ExitCodeSuccess, nil
	}
	var ended endedSessions
	if err := json.Unmarshal(out, &ended); err != nil {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("decoding the admin API's answer: %v", err)
	}
	fmt.Printf("ended %d portal session(s) of %s\n", ended.Ended, ended.Owner)
	return caddy.ExitCodeSuccess, nil
}

package caddymodule

import (
	"fmt"
	"net/http"
	"net/url"

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
	ended, printed, err := adminQuery[endedSessions](fs, http.MethodDelete, "/palmgate/portal/sessions/"+url.PathEscape(fs.Arg(0)), nil)
	if err != nil || printed {
		return exitCode(err), err
	}
	fmt.Printf("ended %d portal session(s) of %s\n", ended.Ended, ended.Owner)
	return caddy.ExitCodeSuccess, nil
}

package caddymodule

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"text/tabwriter"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

// addHumanCommands adds `caddy palmgate human end-sessions <humanId>
// [--revoke-grants]`, which calls the admin API of a running Caddy
// (admin_humans.go).
func addHumanCommands(parent *cobra.Command) {
	humanCmd := &cobra.Command{
		Use:   "human end-sessions|find",
		Short: "Ends a person's sessions and grants through the admin API of a running Caddy",
	}
	end := &cobra.Command{
		Use:   "end-sessions <humanId>",
		Short: "Signs a person out everywhere, and with --revoke-grants revokes every token they hold",
		Long: `
Ends every session of one person, on every instance on the store at once: their
single sign-on sessions (the next login scans their palm again), their agents
page sessions and their developer portal sessions. With --revoke-grants it also
revokes every grant they hold: the refresh and access tokens of every
application, their authorization codes not yet redeemed, the grants that let
their agents act for them, and the consents they gave (the next login asks
again). For a stolen phone or an incident.

The person is named by their humanId: the "owner" the admin API shows on their
applications, the humanId of the audit log, of /v1 and of the leaderboard.

Takes --address (the admin API's address, if not the default), or --config and
--adapter to find it, and --json to print the admin API's JSON answer.
`,
		Args: cobra.ExactArgs(1),
	}
	adminFlags(end)
	end.Flags().Bool("revoke-grants", false, "Also revoke every grant (refresh and access tokens, agents' grants, consents)")
	end.RunE = plainCommand(runEndHuman)
	humanCmd.AddCommand(end)
	find := &cobra.Command{
		Use:   "find --client-id <client_id> --sub <sub>",
		Short: "Finds the humanId of the person a client knows by a pairwise sub",
		Long: `
A relying party knows a person only by the pairwise sub its client received.
This finds the person's humanId (for end-sessions) among the people who hold a
grant, a consent or an agent grant of that client; it fails when none has it.
`,
		Args: cobra.NoArgs,
	}
	adminFlags(find)
	find.Flags().String("client-id", "", "The client that received the sub")
	find.Flags().String("sub", "", "The pairwise sub the client knows the person by")
	find.RunE = plainCommand(runFindHuman)
	humanCmd.AddCommand(find)
	parent.AddCommand(humanCmd)
}

func runEndHuman(fs caddycmd.Flags) (int, error) {
	path := "/palmgate/humans/" + url.PathEscape(fs.Arg(0)) + "/sessions"
	if fs.Bool("revoke-grants") {
		path += "?revoke=grants"
	}
	ended, printed, err := adminQuery[endedHuman](fs, http.MethodDelete, path, nil)
	if err != nil || printed {
		return exitCode(err), err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ENDED\tCOUNT\n")
	fmt.Fprintf(tw, "single sign-on sessions\t%d\n", ended.SSOSessions)
	fmt.Fprintf(tw, "agents page sessions\t%d\n", ended.AgentsPageSessions)
	fmt.Fprintf(tw, "portal sessions\t%d\n", ended.PortalSessions)
	fmt.Fprintf(tw, "logins not yet answered\t%d\n", ended.Logins)
	if ended.GrantsRevoked {
		fmt.Fprintf(tw, "grants (refresh families)\t%d\n", ended.Grants)
		fmt.Fprintf(tw, "agent grants\t%d\n", ended.AgentGrants)
		fmt.Fprintf(tw, "consents\t%d\n", ended.Consents)
		fmt.Fprintf(tw, "codes not yet redeemed\t%d\n", ended.Codes)
	}
	if err := tw.Flush(); err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	if !ended.GrantsRevoked {
		fmt.Printf("the grants of %s were not revoked: their tokens still work (--revoke-grants revokes them)\n", ended.HumanID)
	}
	return caddy.ExitCodeSuccess, nil
}

func runFindHuman(fs caddycmd.Flags) (int, error) {
	q := url.Values{"client_id": {fs.String("client-id")}, "sub": {fs.String("sub")}}
	found, printed, err := adminQuery[foundHuman](fs, http.MethodGet, "/palmgate/humans?"+q.Encode(), nil)
	if err != nil || printed {
		return exitCode(err), err
	}
	fmt.Println(found.HumanID)
	return caddy.ExitCodeSuccess, nil
}

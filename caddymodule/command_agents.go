package caddymodule

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

// addAgentCommands adds `caddy palmgate agent remove <deviceId>`, which calls the
// admin API of a running Caddy (admin_agents.go).
func addAgentCommands(parent *cobra.Command) {
	agentCmd := &cobra.Command{
		Use:   "agent remove <deviceId>",
		Short: "Manages registered agents through the admin API of a running Caddy",
	}
	remove := &cobra.Command{
		Use:   "remove <deviceId>",
		Short: "Removes a registered agent",
		Long: `
Removes the agent registered under <deviceId>: its registration, its key and
its place on the leaderboard. Lookups and signature checks answer
registered:false at once on the instance that serves the admin API, and within
2 seconds on every other instance on the same store. The deviceId and the key
can be registered again afterwards, with a new palm verification.

Takes --address (the admin API's address, if not the default), or --config and
--adapter to find it, and --json to print the admin API's JSON answer.
`,
		Args: cobra.ExactArgs(1),
	}
	adminFlags(remove)
	remove.RunE = plainCommand(runRemoveAgent)
	agentCmd.AddCommand(remove)
	parent.AddCommand(agentCmd)
}

func runRemoveAgent(fs caddycmd.Flags) (int, error) {
	removed, printed, err := adminQuery[removedAgent](fs, http.MethodDelete, "/palmgate/agents/"+url.PathEscape(fs.Arg(0)), nil)
	if err != nil || printed {
		return exitCode(err), err
	}
	fmt.Printf("removed agent %s (human %s, registered %s)\n", removed.DeviceID, removed.HumanID, cliTime(removed.RegisteredAt.Format()))
	return caddy.ExitCodeSuccess, nil
}

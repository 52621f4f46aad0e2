package caddymodule

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/palmgate/palmgate/core/bearer"
)

// The agents option of palmgate_bearer (issue 24): whether tokens of agents acting
// for their humans (with an `act` claim) are admitted, and the placeholder naming
// the agent.

// parseAgentsOption reads `agents allow|deny|only`.
func parseAgentsOption(d *caddyfile.Dispenser, mode *string) error {
	var v string
	if err := singleArg(d, &v); err != nil {
		return err
	}
	if _, err := bearer.ParseAgentsMode(v); err != nil || v == "" {
		return d.Errf("palmgate_bearer agents: %q must be allow, deny or only", v)
	}
	*mode = v
	return nil
}

// agentsMode is the configured mode, checked at provision (validAgentsMode).
func (b *Bearer) agentsMode() bearer.AgentsMode {
	m, _ := bearer.ParseAgentsMode(b.Agents)
	return m
}

// validAgentsMode checks the JSON config's agents.
func (b *Bearer) validAgentsMode() error {
	if _, err := bearer.ParseAgentsMode(b.Agents); err != nil {
		return fmt.Errorf("palmgate_bearer agents: %w", err)
	}
	return nil
}

// setAgentPlaceholder sets {http.auth.user.agent_id}: the agent's deviceId, ""
// for a person's own token.
func setAgentPlaceholder(repl *caddy.Replacer, claims *bearer.Claims) {
	repl.Set("http.auth.user.agent_id", claims.AgentID())
}

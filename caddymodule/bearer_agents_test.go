package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestBearerCaddyfileAgents(t *testing.T) {
	for _, mode := range []string{"allow", "deny", "only"} {
		var b Bearer
		if err := b.UnmarshalCaddyfile(caddyfile.NewTestDispenser("palmgate_bearer {\n\tagents " + mode + "\n}")); err != nil {
			t.Fatalf("agents %s: %v", mode, err)
		}
		if b.Agents != mode || string(b.agentsMode()) != mode {
			t.Errorf("agents %s: Agents = %q", mode, b.Agents)
		}
	}
	var b Bearer
	if err := b.UnmarshalCaddyfile(caddyfile.NewTestDispenser("palmgate_bearer {\n\tscope openid\n}")); err != nil || b.agentsMode() != "deny" {
		t.Errorf("default agents mode = %q, %v; want deny", b.agentsMode(), err)
	}
	for _, bad := range []string{"agents", "agents sometimes", "agents allow deny"} {
		var b Bearer
		err := b.UnmarshalCaddyfile(caddyfile.NewTestDispenser("palmgate_bearer {\n\t" + bad + "\n}"))
		if err == nil || !strings.Contains(err.Error(), "agents") {
			t.Errorf("%q: error %v, want one naming agents", bad, err)
		}
	}
	if err := (&Bearer{Agents: "maybe"}).validAgentsMode(); err == nil {
		t.Error("JSON agents \"maybe\" accepted")
	}
}

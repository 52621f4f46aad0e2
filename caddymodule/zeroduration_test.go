package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// TestZeroDurationsRefused: refetch_interval, timeout (palmgate_bearer) and
// registration's unused written as 0 would silently mean their defaults; they are
// refused, naming the option.
func TestZeroDurationsRefused(t *testing.T) {
	for _, option := range []string{"refetch_interval", "timeout"} {
		var b Bearer
		err := b.UnmarshalCaddyfile(caddyfile.NewTestDispenser("palmgate_bearer {\n\t" + option + " 0s\n}"))
		if err == nil || !strings.Contains(err.Error(), option+": must be more than 0") {
			t.Errorf("%s 0s: error %v, want one naming %s", option, err, option)
		}
	}
	_, err := adapt(t, "{\n\tpalmgate {\n\t\tregistration open {\n\t\t\tunused 0s\n\t\t}\n\t}\n}\n:8080 {\n\tpalmgate\n}\n")
	if err == nil || !strings.Contains(err.Error(), "unused: must be more than 0") {
		t.Errorf("registration unused 0s: error %v, want one naming unused", err)
	}
}

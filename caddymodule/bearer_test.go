package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestBearerCaddyfileAudience(t *testing.T) {
	var b Bearer
	d := caddyfile.NewTestDispenser("palmgate_bearer {\n\tscope orders:read\n\taudience https://orders.example.com/api\n}")
	if err := b.UnmarshalCaddyfile(d); err != nil {
		t.Fatalf("UnmarshalCaddyfile: %v", err)
	}
	if b.Audience != "https://orders.example.com/api" {
		t.Errorf("Audience = %q", b.Audience)
	}
	for _, bad := range []string{"audience", "audience /api", "audience https://a.example/#x", "audience https://a.example https://b.example"} {
		var b Bearer
		err := b.UnmarshalCaddyfile(caddyfile.NewTestDispenser("palmgate_bearer {\n\t" + bad + "\n}"))
		if err == nil || !strings.Contains(err.Error(), "audience") {
			t.Errorf("%q: error %v, want one naming audience", bad, err)
		}
	}
}

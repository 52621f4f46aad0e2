package caddymodule

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/fault"
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

func TestBearerCaddyfileLeeway(t *testing.T) {
	for _, tc := range []struct {
		line string
		want time.Duration
	}{{"leeway 30s", 30 * time.Second}, {"leeway 0", 0}, {"leeway 2m", 2 * time.Minute}} {
		var b Bearer
		if err := b.UnmarshalCaddyfile(caddyfile.NewTestDispenser("palmgate_bearer {\n\tissuer https://id.example.com/oauth2\n\t" + tc.line + "\n}")); err != nil {
			t.Fatalf("%q: %v", tc.line, err)
		}
		if b.Leeway == nil || time.Duration(*b.Leeway) != tc.want {
			t.Errorf("%q: Leeway = %v, want %v", tc.line, b.Leeway, tc.want)
		}
	}
	var unset Bearer
	if err := unset.UnmarshalCaddyfile(caddyfile.NewTestDispenser("palmgate_bearer {\n\tissuer https://id.example.com/oauth2\n}")); err != nil || unset.Leeway != nil {
		t.Errorf("no leeway line: Leeway %v, err %v; want unset (the 30s default at provision)", unset.Leeway, err)
	}
	for _, bad := range []string{"leeway", "leeway soon", "leeway -1s", "leeway 6m", "leeway 1s 2s"} {
		var b Bearer
		err := b.UnmarshalCaddyfile(caddyfile.NewTestDispenser("palmgate_bearer {\n\t" + bad + "\n}"))
		if err == nil || !strings.Contains(err.Error(), "leeway") {
			t.Errorf("%q: error %v, want one naming leeway", bad, err)
		}
	}
}

// TestBearerRefusalText: the error palmgate_bearer hands to Caddy (for
// handle_errors' {http.error.message} and the log) keeps the text it always had,
// and still matches the fault and its cause.
func TestBearerRefusalText(t *testing.T) {
	invalid := fault.New(fault.Unauthorized, bearer.CodeInvalidToken, "the access token is invalid, expired or revoked")
	if got := refusalText(invalid); got.Error() != "invalid_token: the access token is invalid, expired or revoked" || !errors.Is(got, invalid) {
		t.Errorf("invalid token: %q", got)
	}
	cause := fmt.Errorf("%w: dial tcp: refused", bearer.ErrIssuerUnavailable)
	down := &fault.Error{Class: fault.Unavailable, Code: bearer.CodeTemporarilyUnavailable, Message: "the token issuer cannot be reached", Kind: cause}
	if got := refusalText(down); got.Error() != "the token issuer cannot be reached: the token issuer is unavailable: dial tcp: refused" || !errors.Is(got, bearer.ErrIssuerUnavailable) {
		t.Errorf("issuer unavailable: %q", got)
	}
}

package caddymodule

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/palmgate/palmgate/core/keys"
)

// TestCaddyfileKeyRotation: `key_rotation <duration>` sets the interval, `off` (the
// default) leaves it out, and a bad value names the option.
func TestCaddyfileKeyRotation(t *testing.T) {
	wrap := func(line string) string {
		return "{\n\tpalmgate {\n\t\tissuer https://id.example.com\n\t\t" + line + "\n\t}\n}\n:8080 {\n\tpalmgate\n}\n"
	}
	for _, tc := range []struct{ line, want string }{
		{"key_rotation 720h", `"key_rotation":2592000000000000`},
		{"key_rotation 3s", `"key_rotation":3000000000`},
	} {
		got, err := adapt(t, wrap(tc.line))
		if err != nil || !strings.Contains(string(got), tc.want) {
			t.Errorf("%s adapted to %s, %v; want %s", tc.line, got, err, tc.want)
		}
	}
	for _, line := range []string{"key_rotation off", ""} {
		got, err := adapt(t, wrap(line))
		if err != nil || strings.Contains(string(got), "key_rotation") {
			t.Errorf("%q adapted to %s, %v; want no key_rotation", line, got, err)
		}
	}
	for _, line := range []string{"key_rotation", "key_rotation monthly", "key_rotation 1h 2h"} {
		if _, err := adapt(t, wrap(line)); err == nil || !strings.Contains(err.Error(), "key_rotation") {
			t.Errorf("%q: error = %v, want one naming key_rotation", line, err)
		}
	}
}

func TestValidateKeyRotation(t *testing.T) {
	for _, tc := range []struct {
		every time.Duration
		ok    bool
	}{
		{0, true}, {time.Second, true}, {720 * time.Hour, true},
		{500 * time.Millisecond, false}, {-time.Hour, false},
	} {
		a := &App{Issuer: "https://id.example.com", PalmAttestors: []PalmAttestor{{Name: "engine", PublicKey: "k"}},
			KeyRotation: caddy.Duration(tc.every)}
		a.setDefaults()
		err := a.Validate()
		if tc.ok && err != nil {
			t.Errorf("key_rotation %s refused: %v", tc.every, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "key_rotation")) {
			t.Errorf("key_rotation %s: error = %v, want one naming key_rotation", tc.every, err)
		}
	}
}

// TestTokenLifetimes: each algorithm's keys are kept for the longest token they
// sign: ID tokens (access_token_ttl) for all, refresh tokens for ES256 too.
func TestTokenLifetimes(t *testing.T) {
	a := &App{AccessTokenTTL: caddy.Duration(time.Hour), RefreshTokenTTL: caddy.Duration(90 * 24 * time.Hour)}
	got := a.tokenLifetimes()
	want := map[string]time.Duration{keys.RS256: time.Hour, keys.EdDSA: time.Hour, keys.ES256: 90 * 24 * time.Hour}
	for _, alg := range keys.Algorithms {
		if got[alg] != want[alg] {
			t.Errorf("%s lifetime = %s, want %s", alg, got[alg], want[alg])
		}
	}
	// A refresh TTL shorter than the access TTL: access tokens bound ES256.
	a.RefreshTokenTTL = caddy.Duration(time.Minute)
	if got := a.tokenLifetimes()[keys.ES256]; got != time.Hour {
		t.Errorf("ES256 lifetime = %s with a 1m refresh TTL, want the 1h access TTL", got)
	}
}

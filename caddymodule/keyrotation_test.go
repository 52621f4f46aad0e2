package caddymodule

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

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

// TestTokenLifetimes: the app keeps each algorithm's retired keys for the longest
// its tokens may be used (core/oidc's KeyLifetimes of its TTLs): with the default
// TTLs, the refresh token's, for ES256 (refresh tokens) and for the ID token
// algorithms (a logout's id_token_hint) alike.
func TestTokenLifetimes(t *testing.T) {
	a := &App{AccessTokenTTL: caddy.Duration(time.Hour), RefreshTokenTTL: caddy.Duration(90 * 24 * time.Hour)}
	got := a.tokenLifetimes()
	for _, alg := range keys.Algorithms {
		if got[alg] != 90*24*time.Hour {
			t.Errorf("%s lifetime = %s, want the refresh TTL", alg, got[alg])
		}
	}
}

// TestWarnKeyRotation: a key_rotation short for the token lifetimes (more than 10
// keys of an algorithm published at once) is warned about; the usual one is not.
func TestWarnKeyRotation(t *testing.T) {
	for _, tc := range []struct {
		every time.Duration
		warn  bool
	}{
		{0, false}, {720 * time.Hour, false}, {24 * time.Hour, true}, {3 * time.Second, true},
	} {
		core, logs := observer.New(zap.WarnLevel)
		a := &App{Issuer: "https://id.example.com", KeyRotation: caddy.Duration(tc.every), logger: zap.New(core)}
		a.setDefaults() // access_token_ttl 1h, refresh_token_ttl 2160h
		a.warnKeyRotation()
		if got := logs.FilterMessageSnippet("key_rotation is short").Len() == 1; got != tc.warn {
			t.Errorf("key_rotation %s: warned %v, want %v", tc.every, got, tc.warn)
		}
	}
}

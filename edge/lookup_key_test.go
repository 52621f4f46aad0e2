package edge_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"net/http"
	"net/url"
	"testing"

	"github.com/palmgate/palmgate/core/agent"
)

// TestLookupKeyCheckedEveryTime (2026-11-27): the lookup by public key parses
// with the registry's memory of accepted keys; a weak or non-canonical key is
// still 400 invalid_public_key on every lookup (also once a sound key was looked
// up), and a sound key looked up while unregistered, then registered, is found
// registered: remembering that it is sound says nothing of who holds it.
func TestLookupKeyCheckedEveryTime(t *testing.T) {
	e := newEnv(t)
	for _, raw := range []string{
		"0100000000000000000000000000000000000000000000000000000000000000", // the identity point
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // order 2 (y = -1)
		"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // y = p, not canonical
		"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // y = p+1, not canonical (the identity)
	} {
		b, _ := hex.DecodeString(raw)
		key := agent.EncodePublicKey(ed25519.PublicKey(b))
		for i := range 3 {
			if i == 1 { // between two refusals, a sound key is looked up
				wantStatus(t, e.get(t, "/v1/agent/verify/public-key/"+url.PathEscape(newAgent("sound").publicKey())), http.StatusOK)
			}
			wantV1Error(t, e.get(t, "/v1/agent/verify/public-key/"+url.PathEscape(key)), http.StatusBadRequest, "invalid_public_key", "")
		}
	}
	a := newAgent("looked-up-first")
	target := "/v1/agent/verify/public-key/" + url.PathEscape(a.publicKey())
	for range 2 {
		w := e.get(t, target)
		wantStatus(t, w, http.StatusOK)
		if m := decode(t, w); m["registered"] != false || m["registeredAt"] != "never" {
			t.Fatalf("an unregistered key: %s", w.Body)
		}
	}
	e.register(t, a, "alice")
	w := e.get(t, target)
	wantStatus(t, w, http.StatusOK)
	if m := decode(t, w); m["registered"] != true || m["humanId"] == nil {
		t.Errorf("the key registered after two lookups: %s, want the agent", w.Body)
	}
	if bytes.Contains(w.Body.Bytes(), []byte(`"registeredAt":"never"`)) {
		t.Errorf("registeredAt never for a registered agent: %s", w.Body)
	}
}

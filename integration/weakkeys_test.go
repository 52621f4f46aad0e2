package integration

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

// TestWeakKeyRefused is the forgery of issue 9 through the real binary: the
// identity point as public key with the signature R = identity, S = 0, which
// the Ed25519 verification equation accepts for every message. Registration,
// signature verification and key lookup must refuse the key itself
// (invalid_public_key), and nothing may be stored.
func TestWeakKeyRefused(t *testing.T) {
	t.Parallel()
	e := start(t, testserver.Options{})
	identity := make([]byte, ed25519.PublicKeySize)
	identity[0] = 1
	der, err := x509.MarshalPKIXPublicKey(ed25519.PublicKey(identity))
	if err != nil {
		t.Fatal(err)
	}
	key := base64.StdEncoding.EncodeToString(der)
	sig := make([]byte, ed25519.SignatureSize)
	sig[0] = 1 // R = identity (y = 1), S = 0
	body := func(message string, ts int64) map[string]any {
		return map[string]any{
			"deviceId": "forger", "publicKey": key, "message": message,
			"signature": base64.StdEncoding.EncodeToString(sig), "timestamp": ts,
		}
	}
	before := storeCounts(t, e)

	ms := time.Now().UnixMilli()
	e.do(t, "POST", "/v1/agent/register/init", body(fmt.Sprintf("forger-register-%d", ms), ms)).
		ExpectError(t, http.StatusBadRequest, "invalid_public_key", "publicKey")
	for _, msg := range []string{"pay 1000 to mallory", "anything at all"} {
		e.do(t, "POST", "/v1/agent/verify/signature", body(msg, ms)).
			ExpectError(t, http.StatusBadRequest, "invalid_public_key", "publicKey")
	}
	e.do(t, "GET", "/v1/agent/verify/public-key/"+url.PathEscape(key), nil).
		ExpectError(t, http.StatusBadRequest, "invalid_public_key", "publicKey")

	if after := storeCounts(t, e); !maps.Equal(before, after) {
		t.Errorf("store records moved: before %v, after %v", before, after)
	}
}

package minimal

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
)

// Post sends body as an application/json POST to VerifyPath of the server
// under check and returns its answer.
type Post func(body []byte) (status int, header http.Header, answer []byte, err error)

// Check checks that a server answers verify/signature as palmgate does for an
// agent it does not know: 200 {"verified":true,"registered":false} with
// palmgate's headers for a good signature, verified false for a signature of
// another message, 400 for a body missing fields. The minimal server's test
// and the Caddy module's (bench/minimalcaddy) run it, and the load script runs
// it against each minimal server it starts.
func Check(post Post) error {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	body := func(signed, sent string) []byte {
		der, _ := x509.MarshalPKIXPublicKey(key.Public())
		b, _ := json.Marshal(map[string]any{
			"deviceId": "minimal-check", "publicKey": base64.StdEncoding.EncodeToString(der), "message": sent,
			"signature": base64.StdEncoding.EncodeToString(ed25519.Sign(key, []byte(signed))), "timestamp": 1767225600000,
		})
		return b
	}
	want := func(what string, b []byte, status int, answer string) error {
		code, h, got, err := post(b)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if code != status {
			return fmt.Errorf("%s: status %d, want %d (%.200s)", what, code, status, got)
		}
		if answer == "" {
			return nil
		}
		if string(got) != answer+"\n" {
			return fmt.Errorf("%s: %q, want %q", what, got, answer+"\n")
		}
		for name, value := range map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"} {
			if h.Get(name) != value {
				return fmt.Errorf("%s: %s %q, want %q", what, name, h.Get(name), value)
			}
		}
		return nil
	}
	msg := "bench verify check at 1767225600000"
	if err := want("good signature", body(msg, msg), http.StatusOK, `{"verified":true,"registered":false}`); err != nil {
		return err
	}
	if err := want("another message", body(msg, "B"+msg[1:]), http.StatusOK, `{"verified":false,"registered":false}`); err != nil {
		return err
	}
	return want("missing fields", []byte(`{"deviceId":"d"}`), http.StatusBadRequest, "")
}

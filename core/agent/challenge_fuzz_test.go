package agent

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// The fuzz targets of the agent challenge, the outside input of POST
// /v1/agent/register/init and /v1/agent/verify/signature, and of the public key in
// the lookup path. Seeds: testdata/fuzz/<FuzzName>/ and the f.Add calls below. Run
// one with `go test -run '^$' -fuzz '^FuzzParseChallenge$' -fuzztime 30s ./core/agent`
// (or scripts/fuzz.sh for all of them).

// fuzzKey is the fixed key pair of the seeds, so that testdata stays valid.
func fuzzKey() (ed25519.PublicKey, ed25519.PrivateKey) {
	seed := sha256.Sum256([]byte("palmgate fuzz agent"))
	priv := ed25519.NewKeyFromSeed(seed[:])
	return priv.Public().(ed25519.PublicKey), priv
}

// parseCodes are the codes ParseChallenge may answer: the decoding ones of the
// documented set in errors.go (the form, age, replay and registry codes belong to
// later steps).
var parseCodes = map[string]bool{
	CodeInvalidBody: true, CodeMissingField: true, CodeInvalidField: true,
	CodeInvalidPublicKey: true, CodeInvalidSignature: true,
}

// wantAgentError fails unless err is an *Error of kind ErrInvalid with one of codes
// and a message.
func wantAgentError(t *testing.T, err error, codes map[string]bool) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *agent.Error", err, err)
	}
	if e.Kind != ErrInvalid || !errors.Is(err, ErrInvalid) {
		t.Fatalf("error kind = %v, want ErrInvalid (%v)", e.Kind, err)
	}
	if e.Code == "" || !codes[e.Code] {
		t.Fatalf("error code = %q, not one of %v (%v)", e.Code, codes, err)
	}
	if e.Message == "" {
		t.Fatalf("error %s has no message", e.Code)
	}
	return e
}

// encodeChallenge is the JSON body an agent sends for c, in canonical encodings.
func encodeChallenge(t *testing.T, c *Challenge) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"deviceId":  c.DeviceID,
		"publicKey": EncodePublicKey(c.PublicKey),
		"message":   c.Message,
		"signature": base64.StdEncoding.EncodeToString(c.Signature),
		"timestamp": c.Timestamp,
	})
	if err != nil {
		t.Fatalf("encoding challenge: %v", err)
	}
	return b
}

// FuzzParseChallenge: ParseChallenge never panics; it refuses with an *Error of
// kind ErrInvalid and a decoding code, or returns a challenge within the documented
// bounds that survives re-encoding unchanged.
func FuzzParseChallenge(f *testing.F) {
	pub, priv := fuzzKey()
	const ts = int64(1_795_000_000_000)
	msg := "agent-register-" + strconv.FormatInt(ts, 10)
	valid := map[string]any{
		"deviceId":  "agent-1",
		"publicKey": EncodePublicKey(pub),
		"message":   msg,
		"signature": base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte(msg))),
		"timestamp": ts,
	}
	b, _ := json.Marshal(valid)
	f.Add(b)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"DEVICEID":"agent-2",` + string(b[1:])))
	f.Add([]byte(`{"deviceId":"agent-2",` + string(b[1:])))

	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := ParseChallenge(body)
		if err != nil {
			if c != nil {
				t.Fatalf("ParseChallenge returned a challenge and an error: %v", err)
			}
			wantAgentError(t, err, parseCodes)
			return
		}
		if c.DeviceID == "" || len(c.DeviceID) > MaxDeviceIDLen || !utf8.ValidString(c.DeviceID) {
			t.Fatalf("deviceId %q is not 1 to %d bytes of UTF-8", c.DeviceID, MaxDeviceIDLen)
		}
		for _, r := range c.DeviceID {
			if !unicode.IsPrint(r) {
				t.Fatalf("deviceId %q has the unprintable %U", c.DeviceID, r)
			}
		}
		if c.Message == "" || len(c.Message) > MaxMessageLen || !utf8.ValidString(c.Message) {
			t.Fatalf("message of %d bytes is not 1 to %d bytes of UTF-8", len(c.Message), MaxMessageLen)
		}
		if len(c.PublicKey) != ed25519.PublicKeySize {
			t.Fatalf("public key of %d bytes", len(c.PublicKey))
		}
		if len(c.Signature) != ed25519.SignatureSize {
			t.Fatalf("signature of %d bytes", len(c.Signature))
		}
		if c.Timestamp <= 0 {
			t.Fatalf("timestamp %d is not positive", c.Timestamp)
		}
		// Keys matched exactly: the value under the exact key "deviceId" (the only
		// one: a repeated key is refused) is the deviceId, whatever case variants
		// the body also holds.
		var members map[string]json.RawMessage
		var exactID string
		if err := json.Unmarshal(body, &members); err != nil || json.Unmarshal(members["deviceId"], &exactID) != nil || exactID != c.DeviceID {
			t.Fatalf("deviceId %q is not the value of the exact key deviceId (%s, %v)", c.DeviceID, members["deviceId"], err)
		}
		again, err := ParseChallenge(encodeChallenge(t, c))
		if err != nil {
			t.Fatalf("re-encoded challenge refused: %v", err)
		}
		if !reflect.DeepEqual(c, again) {
			t.Fatalf("re-encoded challenge differs:\n got %+v\nwant %+v", again, c)
		}
	})
}

// FuzzRegistrationForm: checkRegistrationForm never panics and, with a valid
// signature and the server clock at the timestamp, accepts exactly the messages
// `<non-empty prefix>-register-<timestamp>` with the timestamp in canonical decimal;
// it refuses them once the clock is past the window or the signature is wrong.
func FuzzRegistrationForm(f *testing.F) {
	pub, priv := fuzzKey()
	const maxAge = 5 * time.Minute
	f.Add("agent-register-1795000000000", int64(1_795_000_000_000))
	f.Add("a-register-b-register-7", int64(7))

	f.Fuzz(func(t *testing.T, message string, ts int64) {
		sig := ed25519.Sign(priv, []byte(message))
		c := &Challenge{DeviceID: "fuzz-agent", PublicKey: pub, Message: message, Signature: sig, Timestamp: ts}
		suffix := "-register-" + strconv.FormatInt(ts, 10)
		wellFormed := ts >= 0 && strings.HasSuffix(message, suffix) && len(message) > len(suffix)
		formCodes := map[string]bool{CodeInvalidMessage: true, CodeTimestampMismatch: true}

		at := time.UnixMilli(ts)
		err := c.checkRegistrationForm(at, maxAge)
		switch {
		case err == nil && !wellFormed:
			t.Fatalf("accepted %q with timestamp %d: not <prefix>%s", message, ts, suffix)
		case err != nil && wellFormed:
			t.Fatalf("refused the well-formed %q with timestamp %d: %v", message, ts, err)
		case err != nil:
			wantAgentError(t, err, formCodes)
		}

		late := at.Add(maxAge + time.Millisecond)
		if err := c.checkRegistrationForm(late, maxAge); err == nil {
			t.Fatalf("accepted %q %s after its timestamp", message, maxAge+time.Millisecond)
		} else {
			wantAgentError(t, err, map[string]bool{CodeInvalidMessage: true, CodeTimestampMismatch: true, CodeTimestampWindow: true})
		}

		forged := *c
		forged.Signature = append([]byte(nil), sig...)
		forged.Signature[len(sig)-1] ^= 0x01
		if err := forged.checkRegistrationForm(at, maxAge); err == nil {
			t.Fatalf("accepted %q with a wrong signature", message)
		} else if wellFormed {
			wantAgentError(t, err, map[string]bool{CodeSignatureMismatch: true})
		}
	})
}

// FuzzParsePublicKey: ParsePublicKey never panics, refuses with invalid_public_key,
// accepts only an Ed25519 DER SPKI in one base64 alphabet (padded or not), and the
// canonical encoding of what it accepts parses back to the same key.
func FuzzParsePublicKey(f *testing.F) {
	pub, _ := fuzzKey()
	f.Add(EncodePublicKey(pub))
	f.Add(strings.TrimRight(strings.NewReplacer("+", "-", "/", "_").Replace(EncodePublicKey(pub)), "="))

	f.Fuzz(func(t *testing.T, s string) {
		key, err := ParsePublicKey(s)
		if err != nil {
			if key != nil {
				t.Fatalf("ParsePublicKey returned a key and an error: %v", err)
			}
			wantAgentError(t, err, map[string]bool{CodeInvalidPublicKey: true})
			return
		}
		if len(key) != ed25519.PublicKeySize {
			t.Fatalf("accepted a key of %d bytes", len(key))
		}
		// Decode independently: the input must be an Ed25519 SPKI of this very key.
		trimmed := strings.TrimRight(s, "=")
		der, err := base64.RawStdEncoding.DecodeString(trimmed)
		if err != nil {
			der, err = base64.RawURLEncoding.DecodeString(trimmed)
		}
		if err != nil {
			t.Fatalf("accepted %q, which is not base64 in either alphabet: %v", s, err)
		}
		parsed, err := x509.ParsePKIXPublicKey(der)
		if err != nil {
			t.Fatalf("accepted %q, which is not a DER SPKI: %v", s, err)
		}
		edKey, ok := parsed.(ed25519.PublicKey)
		if !ok {
			t.Fatalf("accepted a %T key", parsed)
		}
		if !edKey.Equal(key) {
			t.Fatalf("returned %x, the input holds %x", key, edKey)
		}
		enc := EncodePublicKey(key)
		back, err := ParsePublicKey(enc)
		if err != nil {
			t.Fatalf("canonical encoding %q refused: %v", enc, err)
		}
		if !back.Equal(key) || EncodePublicKey(back) != enc {
			t.Fatalf("canonical encoding %q does not round-trip", enc)
		}
	})
}

package agent

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testAgent is an agent with its own Ed25519 key pair.
type testAgent struct {
	deviceID string
	pub      ed25519.PublicKey
	priv     ed25519.PrivateKey
}

// newTestAgent derives a key pair from seedText, so that keys are stable between runs.
func newTestAgent(t *testing.T, deviceID, seedText string) *testAgent {
	t.Helper()
	seed := sha256.Sum256([]byte(seedText))
	priv := ed25519.NewKeyFromSeed(seed[:])
	return &testAgent{deviceID: deviceID, pub: priv.Public().(ed25519.PublicKey), priv: priv}
}

// fields is the JSON object of an AgentChallenge for message and timestamp ts,
// signed by the agent's key.
func (a *testAgent) fields(message string, ts int64) map[string]any {
	return map[string]any{
		"deviceId":  a.deviceID,
		"publicKey": EncodePublicKey(a.pub),
		"message":   message,
		"signature": base64.StdEncoding.EncodeToString(ed25519.Sign(a.priv, []byte(message))),
		"timestamp": ts,
	}
}

// registration is the parsed registration challenge the agent makes at time now.
func (a *testAgent) registration(t *testing.T, now time.Time) *Challenge {
	t.Helper()
	ts := now.UnixMilli()
	c, err := ParseChallenge(mustJSON(t, a.fields("agent-register-"+strconv.FormatInt(ts, 10), ts)))
	if err != nil {
		t.Fatalf("ParseChallenge of a valid registration: %v", err)
	}
	return c
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	return b
}

// wantError checks that err is an *Error of kind ErrInvalid with code and, when field
// is not empty, details.field.
func wantError(t *testing.T, err error, kind error, code, field string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v (%T), want *agent.Error with code %s", err, err, code)
	}
	if !errors.Is(err, kind) {
		t.Errorf("error kind = %v, want %v", e.Kind, kind)
	}
	if e.Code != code {
		t.Errorf("code = %q, want %q (message %q)", e.Code, code, e.Message)
	}
	if field != "" {
		if got, _ := e.Details["field"].(string); got != field {
			t.Errorf("details.field = %q, want %q", got, field)
		}
	}
}

// testTS is a timestamp for parsing tests, which check no age.
const testTS = int64(1795809600123)

func TestParseChallengeValid(t *testing.T) {
	a := newTestAgent(t, "agent-1", "valid")
	msg := "agent-register-" + strconv.FormatInt(testTS, 10)
	c, err := ParseChallenge(mustJSON(t, a.fields(msg, testTS)))
	if err != nil {
		t.Fatalf("ParseChallenge: %v", err)
	}
	if c.DeviceID != "agent-1" || c.Message != msg || c.Timestamp != testTS {
		t.Errorf("parsed %+v", c)
	}
	if !c.PublicKey.Equal(a.pub) {
		t.Errorf("public key = %x, want %x", c.PublicKey, a.pub)
	}
	if !c.Verify() {
		t.Error("Verify() = false for a correctly signed challenge")
	}
}

func TestParseChallengeMissingField(t *testing.T) {
	a := newTestAgent(t, "agent-1", "missing")
	for _, name := range []string{"deviceId", "publicKey", "message", "signature", "timestamp"} {
		t.Run(name, func(t *testing.T) {
			f := a.fields("m-register-1", 1)
			delete(f, name)
			_, err := ParseChallenge(mustJSON(t, f))
			wantError(t, err, ErrInvalid, CodeMissingField, name)
		})
		t.Run(name+"_null", func(t *testing.T) {
			f := a.fields("m-register-1", 1)
			f[name] = nil
			_, err := ParseChallenge(mustJSON(t, f))
			wantError(t, err, ErrInvalid, CodeMissingField, name)
		})
	}
}

func TestParseChallengeWrongType(t *testing.T) {
	a := newTestAgent(t, "agent-1", "types")
	tests := []struct {
		name  string
		field string
		value any
	}{
		{"deviceId number", "deviceId", 42},
		{"deviceId object", "deviceId", map[string]any{"a": 1}},
		{"publicKey bool", "publicKey", true},
		{"publicKey array", "publicKey", []string{"x"}},
		{"message number", "message", 1.5},
		{"message array", "message", []any{}},
		{"signature object", "signature", map[string]any{}},
		{"signature number", "signature", 7},
		{"timestamp float", "timestamp", 1.5},
		{"timestamp string", "timestamp", "1795809600123"},
		{"timestamp bool", "timestamp", false},
		{"timestamp exponent", "timestamp", json.RawMessage("1e3")},
		{"timestamp overflow", "timestamp", json.RawMessage("99999999999999999999")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := a.fields("m-register-1", 1)
			f[tt.field] = tt.value
			_, err := ParseChallenge(mustJSON(t, f))
			wantError(t, err, ErrInvalid, CodeInvalidField, tt.field)
		})
	}
}

func TestParseChallengeInvalidBody(t *testing.T) {
	a := newTestAgent(t, "agent-1", "body")
	valid := string(mustJSON(t, a.fields("m-register-1", 1)))
	tests := []struct{ name, body string }{
		{"empty", ""},
		{"not JSON", "deviceId=agent-1"},
		{"JSON array", "[" + valid + "]"},
		{"JSON string", `"hello"`},
		{"truncated", valid[:len(valid)-1]},
		{"second object", valid + ` {}`},
		{"trailing garbage", valid + `x`},
		{"trailing bracket", valid + `}`},
		{"invalid UTF-8 in deviceId", strings.Replace(valid, `"agent-1"`, "\"agent-\xff\"", 1)},
		{"invalid UTF-8 in message", strings.Replace(valid, `"m-register-1"`, "\"m\xc3-register-1\"", 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseChallenge([]byte(tt.body))
			if err == nil {
				t.Fatalf("ParseChallenge accepted %q as %+v", tt.body, c)
			}
			wantError(t, err, ErrInvalid, CodeInvalidBody, "")
		})
	}
	t.Run("trailing whitespace is fine", func(t *testing.T) {
		if _, err := ParseChallenge([]byte(valid + " \n\t")); err != nil {
			t.Fatalf("ParseChallenge: %v", err)
		}
	})
}

func TestParseChallengeDeviceID(t *testing.T) {
	tests := []struct {
		name     string
		deviceID string
		ok       bool
	}{
		{"one byte", "a", true},
		{"256 bytes", strings.Repeat("d", MaxDeviceIDLen), true},
		{"256 bytes of two-byte runes", strings.Repeat("é", MaxDeviceIDLen/2), true},
		{"unicode and spaces", "my agent ✓", true},
		{"empty", "", false},
		{"257 bytes", strings.Repeat("d", MaxDeviceIDLen+1), false},
		{"258 bytes of two-byte runes", strings.Repeat("é", MaxDeviceIDLen/2+1), false},
		{"NUL", "agent\x00", false},
		{"newline", "agent\n1", false},
		{"tab", "agent\t1", false},
		{"DEL", "agent\x7f", false},
		{"C1 control", "agent\u0085", false},
		{"zero width space", "agent\u200b", false},
	}
	a := newTestAgent(t, "", "device")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := a.fields("m-register-1", 1)
			f["deviceId"] = tt.deviceID
			c, err := ParseChallenge(mustJSON(t, f))
			if tt.ok {
				if err != nil {
					t.Fatalf("ParseChallenge: %v", err)
				}
				if c.DeviceID != tt.deviceID {
					t.Errorf("DeviceID = %q, want %q", c.DeviceID, tt.deviceID)
				}
				return
			}
			wantError(t, err, ErrInvalid, CodeInvalidField, "deviceId")
		})
	}
}

func TestValidateDeviceIDInvalidUTF8(t *testing.T) {
	// Lookups take the deviceId from the path, where invalid UTF-8 can arrive as is.
	for _, id := range []string{"\xff", "agent-\xc3", "\xed\xa0\x80"} {
		wantError(t, ValidateDeviceID(id), ErrInvalid, CodeInvalidField, "deviceId")
	}
}

func TestParseChallengeMessage(t *testing.T) {
	tests := []struct {
		name    string
		message string
		ok      bool
	}{
		{"one byte", "m", true},
		{"4096 bytes", strings.Repeat("m", MaxMessageLen), true},
		{"empty", "", false},
		{"4097 bytes", strings.Repeat("m", MaxMessageLen+1), false},
	}
	a := newTestAgent(t, "agent-1", "message")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseChallenge(mustJSON(t, a.fields(tt.message, 1)))
			if tt.ok {
				if err != nil {
					t.Fatalf("ParseChallenge: %v", err)
				}
				if c.Message != tt.message || !c.Verify() {
					t.Errorf("message not kept as signed (len %d, verify %v)", len(c.Message), c.Verify())
				}
				return
			}
			wantError(t, err, ErrInvalid, CodeInvalidField, "message")
		})
	}
}

// agentWithURLUnsafeKey returns an agent whose standard base64 SPKI contains '+' or
// '/', so that base64url and standard forms differ.
func agentWithURLUnsafeKey(t *testing.T) *testAgent {
	t.Helper()
	for i := range 1000 {
		a := newTestAgent(t, "agent-1", "url-unsafe-"+strconv.Itoa(i))
		if strings.ContainsAny(EncodePublicKey(a.pub), "+/") {
			return a
		}
	}
	t.Fatal("no key with + or / in its base64 form")
	return nil
}

func TestParseChallengePublicKey(t *testing.T) {
	a := agentWithURLUnsafeKey(t)
	der, err := x509.MarshalPKIXPublicKey(a.pub)
	if err != nil {
		t.Fatal(err)
	}
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p256DER, err := x509.MarshalPKIXPublicKey(&p256.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		key  string
		ok   bool
	}{
		{"standard padded", base64.StdEncoding.EncodeToString(der), true},
		{"standard unpadded", base64.RawStdEncoding.EncodeToString(der), true},
		{"base64url padded", base64.URLEncoding.EncodeToString(der), true},
		{"base64url unpadded", base64.RawURLEncoding.EncodeToString(der), true},
		{"empty", "", false},
		{"not base64", "not base64 at all!", false},
		{"mixed alphabets", "+" + base64.RawURLEncoding.EncodeToString(der)[1:] + "_", false},
		{"too long", strings.Repeat("A", 600), false},
		{"not SPKI", base64.StdEncoding.EncodeToString([]byte("definitely not DER")), false},
		{"raw 32-byte key", base64.StdEncoding.EncodeToString(a.pub), false},
		{"truncated SPKI", base64.StdEncoding.EncodeToString(der[:len(der)-1]), false},
		{"P-256 key", base64.StdEncoding.EncodeToString(p256DER), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := a.fields("m-register-1", 1)
			f["publicKey"] = tt.key
			c, err := ParseChallenge(mustJSON(t, f))
			if tt.ok {
				if err != nil {
					t.Fatalf("ParseChallenge: %v", err)
				}
				if !c.PublicKey.Equal(a.pub) {
					t.Errorf("PublicKey = %x, want %x", c.PublicKey, a.pub)
				}
				return
			}
			wantError(t, err, ErrInvalid, CodeInvalidPublicKey, "publicKey")
		})
	}
}

func TestParseChallengeSignature(t *testing.T) {
	a := agentWithURLUnsafeKey(t)
	sig := ed25519.Sign(a.priv, []byte("m-register-1"))
	tests := []struct {
		name string
		sig  string
		ok   bool
	}{
		{"standard padded", base64.StdEncoding.EncodeToString(sig), true},
		{"standard unpadded", base64.RawStdEncoding.EncodeToString(sig), true},
		{"base64url padded", base64.URLEncoding.EncodeToString(sig), true},
		{"base64url unpadded", base64.RawURLEncoding.EncodeToString(sig), true},
		{"empty", "", false},
		{"not base64", "***", false},
		{"hex", hex.EncodeToString(sig), false},
		{"63 bytes", base64.StdEncoding.EncodeToString(sig[:63]), false},
		{"65 bytes", base64.StdEncoding.EncodeToString(append(sig, 0)), false},
		{"0 bytes after padding", "====", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := a.fields("m-register-1", 1)
			f["signature"] = tt.sig
			c, err := ParseChallenge(mustJSON(t, f))
			if tt.ok {
				if err != nil {
					t.Fatalf("ParseChallenge: %v", err)
				}
				if !c.Verify() {
					t.Error("Verify() = false")
				}
				return
			}
			wantError(t, err, ErrInvalid, CodeInvalidSignature, "signature")
		})
	}
}

func TestParseChallengeTimestampNotPositive(t *testing.T) {
	a := newTestAgent(t, "agent-1", "ts")
	for _, ts := range []int64{0, -1} {
		_, err := ParseChallenge(mustJSON(t, a.fields("m-register-1", ts)))
		wantError(t, err, ErrInvalid, CodeInvalidField, "timestamp")
	}
}

func TestParsePublicKeyRoundTrip(t *testing.T) {
	for i := range 20 {
		a := newTestAgent(t, "", "roundtrip-"+strconv.Itoa(i))
		enc := EncodePublicKey(a.pub)
		der, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			t.Fatalf("EncodePublicKey is not standard base64: %q", enc)
		}
		if want, _ := x509.MarshalPKIXPublicKey(a.pub); string(der) != string(want) {
			t.Fatalf("EncodePublicKey is not the DER SPKI of the key")
		}
		for _, form := range []string{enc, base64.RawURLEncoding.EncodeToString(der), base64.RawStdEncoding.EncodeToString(der)} {
			got, err := ParsePublicKey(form)
			if err != nil {
				t.Fatalf("ParsePublicKey(%q): %v", form, err)
			}
			if !got.Equal(a.pub) || EncodePublicKey(got) != enc {
				t.Fatalf("round trip of %q gave %x", form, got)
			}
		}
	}
}

func TestCheckRegistrationForm(t *testing.T) {
	const maxAge = 5 * time.Minute
	now := time.Date(2026, 11, 21, 20, 0, 0, 123_000_000, time.UTC)
	nowMS := now.UnixMilli()
	ms := func(ts int64) string { return strconv.FormatInt(ts, 10) }
	a := newTestAgent(t, "agent-1", "form")
	other := newTestAgent(t, "agent-2", "form-other")
	tests := []struct {
		name    string
		message string
		ts      int64
		signer  *testAgent // nil: a
		signed  string     // message actually signed; "": message
		code    string     // "": accepted
	}{
		{name: "ok", message: "agent-register-" + ms(nowMS), ts: nowMS},
		{name: "prefix with dashes", message: "my-agent-v2-register-" + ms(nowMS), ts: nowMS},
		{name: "prefix containing the separator", message: "a-register-b-register-" + ms(nowMS), ts: nowMS},
		{name: "no -register-", message: "agent-" + ms(nowMS), ts: nowMS, code: CodeInvalidMessage},
		{name: "register without dashes", message: "agentregister" + ms(nowMS), ts: nowMS, code: CodeInvalidMessage},
		{name: "empty prefix", message: "-register-" + ms(nowMS), ts: nowMS, code: CodeInvalidMessage},
		{name: "empty suffix", message: "agent-register-", ts: nowMS, code: CodeInvalidMessage},
		{name: "non-digit suffix", message: "agent-register-" + ms(nowMS) + "x", ts: nowMS, code: CodeInvalidMessage},
		{name: "hex suffix", message: "agent-register-0x1f", ts: nowMS, code: CodeInvalidMessage},
		{name: "plus sign", message: "agent-register-+" + ms(nowMS), ts: nowMS, code: CodeInvalidMessage},
		{name: "minus sign", message: "agent-register--" + ms(nowMS), ts: nowMS, code: CodeInvalidMessage},
		{name: "space", message: "agent-register- " + ms(nowMS), ts: nowMS, code: CodeInvalidMessage},
		{name: "seconds not milliseconds", message: "agent-register-" + ms(nowMS/1000), ts: nowMS, code: CodeTimestampMismatch},
		{name: "timestamp mismatch", message: "agent-register-" + ms(nowMS-1), ts: nowMS, code: CodeTimestampMismatch},
		{name: "age exactly maxAge in the past", message: "agent-register-" + ms(nowMS-maxAge.Milliseconds()), ts: nowMS - maxAge.Milliseconds()},
		{name: "age maxAge+1ms in the past", message: "agent-register-" + ms(nowMS-maxAge.Milliseconds()-1), ts: nowMS - maxAge.Milliseconds() - 1, code: CodeTimestampWindow},
		{name: "age exactly maxAge in the future", message: "agent-register-" + ms(nowMS+maxAge.Milliseconds()), ts: nowMS + maxAge.Milliseconds()},
		{name: "age maxAge+1ms in the future", message: "agent-register-" + ms(nowMS+maxAge.Milliseconds()+1), ts: nowMS + maxAge.Milliseconds() + 1, code: CodeTimestampWindow},
		{name: "far past", message: "agent-register-1", ts: 1, code: CodeTimestampWindow},
		{name: "far future", message: "agent-register-9223372036854775807", ts: 1<<63 - 1, code: CodeTimestampWindow},
		{name: "signature over another message", message: "agent-register-" + ms(nowMS), ts: nowMS, signed: "agent-register-" + ms(nowMS-1), code: CodeSignatureMismatch},
		{name: "signature by another key", message: "agent-register-" + ms(nowMS), ts: nowMS, signer: other, code: CodeSignatureMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			signer, signed := tt.signer, tt.signed
			if signer == nil {
				signer = a
			}
			if signed == "" {
				signed = tt.message
			}
			c := &Challenge{
				DeviceID:  a.deviceID,
				PublicKey: a.pub,
				Message:   tt.message,
				Signature: ed25519.Sign(signer.priv, []byte(signed)),
				Timestamp: tt.ts,
			}
			err := c.checkRegistrationForm(now, maxAge)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("checkRegistrationForm: %v", err)
				}
				return
			}
			wantError(t, err, ErrInvalid, tt.code, "")
		})
	}
}

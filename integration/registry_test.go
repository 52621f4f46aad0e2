package integration

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

// TestRegistryHappyPath walks one agent through init, the owner's page, a
// dev-mode palm scan, polling, the lookups, signature verification and the
// leaderboard.
func TestRegistryHappyPath(t *testing.T) {
	t.Parallel()
	e := start(t, testserver.Options{})
	a := newAgent(t, "happy-agent-1")
	alice := e.subject("alice")

	e.expectUnregistered(t, a)
	if lb := e.leaderboard(t, ""); len(lb) != 0 {
		t.Fatalf("leaderboard of a fresh server: %+v, want []", lb)
	}

	before := time.Now()
	s := e.initSession(t, a.registration(time.Now()))
	between(t, "expiresAt (default registration_session_ttl 15m)", parseTime(t, s.ExpiresAt), before.Add(15*time.Minute), time.Now().Add(15*time.Minute), time.Millisecond)

	st := e.status(t, s.ID)
	if str(st["status"]) != "pending" {
		t.Errorf("status after init: %v, want pending", st)
	}
	if _, ok := st["deviceId"]; ok {
		t.Errorf("pending status carries deviceId: %v", st)
	}
	if _, ok := st["registration"]; ok {
		t.Errorf("pending status carries registration: %v", st)
	}

	c := e.verifyInfo(t, s)
	if c.DeviceID != a.deviceID || c.Status != "pending" {
		t.Errorf("verify page JSON: %+v, want deviceId %q and status pending", c, a.deviceID)
	}
	ch := e.challenge(t, c)
	req, _ := ch["request"].(map[string]any)
	if str(ch["challengeId"]) != c.ChallengeID || str(ch["purpose"]) != "agent_registration" ||
		str(ch["status"]) != "pending" || str(req["deviceId"]) != a.deviceID || !timeRE.MatchString(str(ch["expiresAt"])) {
		t.Errorf("palm challenge: %v, want challengeId %s, purpose agent_registration, status pending, request.deviceId %q",
			ch, c.ChallengeID, a.deviceID)
	}
	e.expectUnregistered(t, a) // nothing is registered before the scan

	scanned := time.Now()
	if m := e.devScan(t, c, alice).ExpectStatus(t, http.StatusOK).Object(t); str(m["status"]) != "verified" {
		t.Fatalf("dev-scan: %v, want status verified", m)
	}
	scanDone := time.Now()

	st = e.status(t, s.ID)
	reg, _ := st["registration"].(map[string]any)
	if str(st["status"]) != "completed" || str(st["deviceId"]) != a.deviceID || str(reg["publicKey"]) != a.pub {
		t.Fatalf("status after the scan: %v, want completed with deviceId %q and publicKey %q", st, a.deviceID, a.pub)
	}
	registeredAt := str(reg["registeredAt"])
	if !timeRE.MatchString(registeredAt) {
		t.Fatalf("registeredAt %q is not RFC 3339 UTC with milliseconds", registeredAt)
	}
	between(t, "registeredAt", parseTime(t, registeredAt), scanned, scanDone, time.Millisecond)
	if got := e.verifyInfo(t, s).Status; got != "verified" {
		t.Errorf("verify page status after the scan: %q, want verified", got)
	}
	if got := e.challengeStatus(t, c); got != "verified" {
		t.Errorf("palm challenge status after the scan: %q, want verified", got)
	}

	byDevice := e.lookupDevice(t, a.deviceID)
	if !byDevice.Registered || !byDevice.Verified || byDevice.RegisteredAt != registeredAt {
		t.Errorf("device lookup: %+v, want registered, verified, registeredAt %s", byDevice, registeredAt)
	}
	if byKey := e.lookupKey(t, url.PathEscape(a.pub)); byKey != byDevice {
		t.Errorf("key lookup: %+v, device lookup: %+v", byKey, byDevice)
	}

	m := e.do(t, "POST", "/v1/agent/verify/signature", a.sign("hello from the agent", time.Now().UnixMilli())).
		ExpectStatus(t, http.StatusOK).Object(t)
	if m["verified"] != true || m["registered"] != true {
		t.Errorf("verify/signature of the registered agent: %v, want verified and registered", m)
	}

	lb := e.leaderboard(t, "")
	want := []entry{{HumanID: byDevice.HumanID, AgentCount: 1, EarliestRegisteredAt: registeredAt}}
	if fmt.Sprint(lb) != fmt.Sprint(want) {
		t.Errorf("leaderboard: %+v, want %+v", lb, want)
	}

	// The device, and the key, are taken now.
	other := newAgent(t, a.deviceID)
	e.do(t, "POST", "/v1/agent/register/init", other.registration(time.Now())).ExpectError(t, http.StatusConflict, "already_registered", "")
	sameKey := *a
	sameKey.deviceID = "happy-agent-2"
	e.do(t, "POST", "/v1/agent/register/init", sameKey.registration(time.Now())).ExpectError(t, http.StatusConflict, "already_registered", "")
	e.expectUnregistered(t, &agent{deviceID: sameKey.deviceID, pub: other.pub})
	if got := e.lookupDevice(t, a.deviceID); got != byDevice {
		t.Errorf("device lookup after refused inits: %+v, want unchanged %+v", got, byDevice)
	}
	if lb2 := e.leaderboard(t, ""); fmt.Sprint(lb2) != fmt.Sprint(lb) {
		t.Errorf("leaderboard after refused inits: %+v, want unchanged %+v", lb2, lb)
	}
}

// initCase is a request to POST /v1/agent/register/init that must be refused.
type initCase struct {
	name   string
	body   func(a *agent) any // built from a fresh agent
	header []string           // extra request headers
	status int
	code   string
	field  string // details.field, when the code names one
}

// TestRegistryInitErrors checks every refusal of init, each with its status and
// code, and that refusals leave nothing behind.
func TestRegistryInitErrors(t *testing.T) {
	t.Parallel()
	e := start(t, testserver.Options{Global: "rate_limit off"}) // many writes a minute
	taken := newAgent(t, "taken-device")
	takenReg := e.register(t, taken, e.subject("owner"))
	lbBefore := e.leaderboard(t, "")

	p256 := func() string {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
		return base64.StdEncoding.EncodeToString(der)
	}()
	without := func(field string) func(*agent) any {
		return func(a *agent) any { b := a.registration(time.Now()); delete(b, field); return b }
	}
	with := func(field string, v any) func(*agent) any {
		return func(a *agent) any { b := a.registration(time.Now()); b[field] = v; return b }
	}
	signedAt := func(at time.Time) func(*agent) any { return func(a *agent) any { return a.registration(at) } }
	signedMessage := func(msg string) func(*agent) any {
		return func(a *agent) any { return a.sign(msg, time.Now().UnixMilli()) }
	}
	otherKey := newAgent(t, "other-key")
	raw := func(s string) func(*agent) any { return func(*agent) any { return s } }

	cases := []initCase{
		{name: "not JSON", body: raw("deviceId=x"), status: 400, code: "invalid_body"},
		{name: "empty body", body: raw(""), status: 400, code: "invalid_body"},
		{name: "JSON array", body: raw(`[1,2,3]`), status: 400, code: "invalid_body"},
		{name: "JSON string", body: raw(`"hello"`), status: 400, code: "invalid_body"},
		{name: "trailing data", body: func(a *agent) any {
			b, _ := json.Marshal(a.registration(time.Now()))
			return string(b) + ` {}`
		}, status: 400, code: "invalid_body"},
		{name: "truncated JSON", body: raw(`{"deviceId":"x",`), status: 400, code: "invalid_body"},

		{name: "missing deviceId", body: without("deviceId"), status: 400, code: "missing_field", field: "deviceId"},
		{name: "missing publicKey", body: without("publicKey"), status: 400, code: "missing_field", field: "publicKey"},
		{name: "missing message", body: without("message"), status: 400, code: "missing_field", field: "message"},
		{name: "missing signature", body: without("signature"), status: 400, code: "missing_field", field: "signature"},
		{name: "missing timestamp", body: without("timestamp"), status: 400, code: "missing_field", field: "timestamp"},
		{name: "empty object", body: raw(`{}`), status: 400, code: "missing_field"},

		{name: "deviceId is a number", body: with("deviceId", 42), status: 400, code: "invalid_field", field: "deviceId"},
		{name: "deviceId empty", body: with("deviceId", ""), status: 400, code: "invalid_field", field: "deviceId"},
		{name: "deviceId with a control character", body: with("deviceId", "dev\x00ice"), status: 400, code: "invalid_field", field: "deviceId"},
		{name: "deviceId with a newline", body: with("deviceId", "dev\nice"), status: 400, code: "invalid_field", field: "deviceId"},
		{name: "deviceId too long", body: with("deviceId", strings.Repeat("d", 5000)), status: 400, code: "invalid_field", field: "deviceId"},
		{name: "publicKey is a number", body: with("publicKey", 7), status: 400, code: "invalid_field", field: "publicKey"},
		{name: "message is an object", body: with("message", map[string]any{}), status: 400, code: "invalid_field", field: "message"},
		{name: "message empty", body: signedMessage(""), status: 400, code: "invalid_field", field: "message"},
		{name: "message too long", body: signedMessage(strings.Repeat("m", 20000) + "-register-1"), status: 400, code: "invalid_field", field: "message"},
		{name: "signature is a bool", body: with("signature", true), status: 400, code: "invalid_field", field: "signature"},
		{name: "timestamp is a string", body: func(a *agent) any {
			b := a.registration(time.Now())
			b["timestamp"] = fmt.Sprint(b["timestamp"])
			return b
		}, status: 400, code: "invalid_field", field: "timestamp"},
		{name: "timestamp has a fraction", body: with("timestamp", 1.5), status: 400, code: "invalid_field", field: "timestamp"},
		{name: "timestamp zero", body: func(a *agent) any { return a.sign("x-register-0", 0) }, status: 400, code: "invalid_field", field: "timestamp"},
		{name: "timestamp negative", body: func(a *agent) any { return a.sign("x-register-5", -5) }, status: 400, code: "invalid_field", field: "timestamp"},

		{name: "publicKey not base64", body: with("publicKey", "!!not*base64!!"), status: 400, code: "invalid_public_key", field: "publicKey"},
		{name: "publicKey not SPKI", body: with("publicKey", base64.StdEncoding.EncodeToString([]byte("definitely not DER at all"))), status: 400, code: "invalid_public_key", field: "publicKey"},
		{name: "publicKey raw 32 bytes", body: func(a *agent) any {
			b := a.registration(time.Now())
			b["publicKey"] = base64.StdEncoding.EncodeToString(a.priv.Public().(ed25519.PublicKey))
			return b
		}, status: 400, code: "invalid_public_key", field: "publicKey"},
		{name: "publicKey P-256", body: with("publicKey", p256), status: 400, code: "invalid_public_key", field: "publicKey"},

		{name: "signature not base64", body: with("signature", "%%%%"), status: 400, code: "invalid_signature", field: "signature"},
		{name: "signature 32 bytes", body: with("signature", base64.StdEncoding.EncodeToString(make([]byte, 32))), status: 400, code: "invalid_signature", field: "signature"},

		{name: "message without -register-", body: signedMessage("hello world"), status: 400, code: "invalid_message", field: "message"},
		{name: "message with letters for a timestamp", body: signedMessage("x-register-abc"), status: 400, code: "invalid_message", field: "message"},
		{name: "message without timestamp", body: signedMessage("x-register-"), status: 400, code: "invalid_message", field: "message"},
		{name: "timestamp differs from the message", body: func(a *agent) any {
			ms := time.Now().UnixMilli()
			return a.sign(fmt.Sprintf("mismatch%s-register-%d", randHex(3), ms+1), ms)
		}, status: 400, code: "timestamp_mismatch", field: "timestamp"},
		// 10 minutes (the window is 5): still outside when the case is sent late
		// on a loaded machine (TestChallengeMaxAge tests the window's edges).
		{name: "timestamp 10 minutes old", body: signedAt(time.Now().Add(-10 * time.Minute)), status: 400, code: "timestamp_out_of_window", field: "timestamp"},
		{name: "timestamp 10 minutes ahead", body: signedAt(time.Now().Add(10 * time.Minute)), status: 400, code: "timestamp_out_of_window", field: "timestamp"},
		{name: "signature by another key", body: func(a *agent) any {
			b := a.registration(time.Now())
			b["signature"] = otherKey.sign(b["message"].(string), 1)["signature"]
			return b
		}, status: 400, code: "signature_mismatch", field: "signature"},
		{name: "signature over another message", body: func(a *agent) any {
			b := a.registration(time.Now())
			b["signature"] = a.sign(b["message"].(string)+"0", 1)["signature"]
			return b
		}, status: 400, code: "signature_mismatch", field: "signature"},

		{name: "deviceId already registered", body: func(a *agent) any {
			a.deviceID = taken.deviceID
			return a.registration(time.Now())
		}, status: 409, code: "already_registered"},
		{name: "public key already registered", body: func(a *agent) any {
			b := taken.registration(time.Now())
			b["deviceId"] = a.deviceID
			return b
		}, status: 409, code: "already_registered"},

		{name: "body over 64 KiB", body: with("message", strings.Repeat("m", 70<<10)), status: 413, code: "body_too_large"},
		{name: "body over 64 KiB, chunked", body: func(a *agent) any {
			b, _ := json.Marshal(a.registration(time.Now()))
			pad := `{"padding":"` + strings.Repeat("p", 70<<10) + `",` + string(b[1:])
			return io.MultiReader(strings.NewReader(pad)) // no Content-Length
		}, status: 413, code: "body_too_large"},
		{name: "Content-Type text/plain", body: signedAt(time.Now()), header: []string{"Content-Type", "text/plain"}, status: 415, code: "unsupported_media_type"},
		{name: "Content-Type form", body: signedAt(time.Now()), header: []string{"Content-Type", "application/x-www-form-urlencoded"}, status: 415, code: "unsupported_media_type"},
		{name: "no Content-Type", body: signedAt(time.Now()), header: []string{"Content-Type", ""}, status: 415, code: "unsupported_media_type"},
	}

	var refused []*agent
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newAgent(t, fmt.Sprintf("refused-%d", i))
			body := tc.body(a)
			resp := e.do(t, "POST", "/v1/agent/register/init", body, tc.header...)
			resp.ExpectError(t, tc.status, tc.code, tc.field)
			if a.deviceID != taken.deviceID {
				refused = append(refused, a)
			}
		})
	}

	t.Run("accepted near the window's edges", func(t *testing.T) {
		for _, d := range []time.Duration{-4 * time.Minute, 4 * time.Minute} {
			a := newAgent(t, fmt.Sprint("edge", d))
			e.initSession(t, a.registration(time.Now().Add(d)))
		}
	})

	t.Run("state after refusals", func(t *testing.T) {
		for _, a := range refused {
			if l := e.lookupDevice(t, a.deviceID); l.Registered {
				t.Errorf("device %q registered after a refused init: %+v", a.deviceID, l)
			}
		}
		if l := e.lookupDevice(t, taken.deviceID); l.HumanID != takenReg.humanID || l.RegisteredAt != takenReg.registeredAt {
			t.Errorf("the registered agent changed: %+v, want humanId %s registeredAt %s", l, takenReg.humanID, takenReg.registeredAt)
		}
		if lb := e.leaderboard(t, ""); fmt.Sprint(lb) != fmt.Sprint(lbBefore) {
			t.Errorf("leaderboard after refusals: %+v, want unchanged %+v", lb, lbBefore)
		}
	})
}

// TestRegistryRequestErrors covers replays, methods, media types, unknown paths
// and unknown sessions.
func TestRegistryRequestErrors(t *testing.T) {
	t.Parallel()
	e := start(t, testserver.Options{})

	t.Run("replayed challenge", func(t *testing.T) {
		a := newAgent(t, "replayer")
		body := a.registration(time.Now())
		first := e.initSession(t, body)
		e.do(t, "POST", "/v1/agent/register/init", body).ExpectError(t, http.StatusBadRequest, "challenge_replayed", "")
		// The first session is untouched and a fresh challenge is still welcome.
		if st := e.status(t, first.ID); str(st["status"]) != "pending" {
			t.Errorf("first session after the replay: %v, want pending", st)
		}
		e.initSession(t, a.registration(time.Now()))
		e.expectUnregistered(t, a)
	})

	for _, ct := range []string{"application/json; charset=utf-8", "Application/JSON"} {
		t.Run("Content-Type "+ct+" accepted", func(t *testing.T) {
			a := newAgent(t, "ct-agent-"+ct)
			e.do(t, "POST", "/v1/agent/register/init", a.registration(time.Now()), "Content-Type", ct).ExpectStatus(t, http.StatusCreated)
		})
	}

	for _, tc := range []struct {
		method, path string
		allow        string
	}{
		{"GET", "/v1/agent/register/init", "POST"},
		{"PUT", "/v1/agent/register/init", "POST"},
		{"DELETE", "/v1/agent/register/init", "POST"},
		{"GET", "/v1/agent/verify/signature", "POST"},
		{"POST", "/v1/human/leaderboard", "GET"},
		{"POST", "/v1/agent/verify/device/some-device", "GET"},
	} {
		t.Run("method "+tc.method+" "+tc.path, func(t *testing.T) {
			var body any
			if tc.method != "GET" && tc.method != "DELETE" {
				body = map[string]any{}
			}
			resp := e.do(t, tc.method, tc.path, body)
			resp.ExpectError(t, http.StatusMethodNotAllowed, "method_not_allowed", "")
			if allow := resp.Header.Get("Allow"); !strings.Contains(allow, tc.allow) {
				t.Errorf("%s: Allow %q, want it to list %s", resp.Request, allow, tc.allow)
			}
		})
	}

	for _, path := range []string{"/v1/nope", "/v1/agent", "/v1/agent/register", "/v1/agent/register/init/extra", "/v1/human/leaderboard/x"} {
		t.Run("unknown path "+path, func(t *testing.T) {
			e.do(t, "GET", path, nil).ExpectError(t, http.StatusNotFound, "not_found", "")
		})
	}

	unknown := "7d3c1a2e-5b6f-4c8d-9e0f-1a2b3c4d5e6f"
	for _, id := range []string{unknown, "not-a-uuid", strings.ToUpper(unknown)} {
		t.Run("unknown session "+id, func(t *testing.T) {
			e.do(t, "GET", "/v1/agent/register/"+id+"/status", nil).ExpectError(t, http.StatusNotFound, "session_not_found", "")
			e.do(t, "GET", "/v1/agent/register/"+id+"/verify", nil, "Accept", "application/json").
				ExpectError(t, http.StatusNotFound, "session_not_found", "")
		})
	}
}

// TestRegistryLookups checks lookups by device and by key in every accepted
// encoding, unknown agents and undecodable keys.
func TestRegistryLookups(t *testing.T) {
	t.Parallel()
	e := start(t, testserver.Options{})
	a := newAgent(t, "lookup agent@home:1") // a space, '@' and ':' in the path
	r := e.register(t, a, e.subject("lookup-owner"))
	want := lookup{Registered: true, Verified: true, HumanID: r.humanID, RegisteredAt: r.registeredAt}

	allEscaped := strings.NewReplacer("+", "%2B", "/", "%2F", "=", "%3D").Replace(a.pub)
	for name, key := range map[string]string{
		"std base64, path-escaped":     url.PathEscape(a.pub),
		"std base64, all escaped":      allEscaped,
		"base64url":                    a.urlKey(),
		"base64url without padding":    strings.TrimRight(a.urlKey(), "="),
		"base64url with escaped '='":   strings.ReplaceAll(a.urlKey(), "=", "%3D"),
		"base64url, unneeded escaping": strings.ReplaceAll(a.urlKey(), "-", "%2D"),
	} {
		t.Run(name, func(t *testing.T) {
			if got := e.lookupKey(t, key); got != want {
				t.Errorf("lookup by key %s: %+v, want %+v", key, got, want)
			}
		})
	}
	t.Run("device", func(t *testing.T) {
		if got := e.lookupDevice(t, a.deviceID); got != want {
			t.Errorf("lookup by device: %+v, want %+v", got, want)
		}
	})
	for _, id := range []string{"agent-ü-日本-🙂", "org/app:agent 1", "a%2Fb?c#d&e=f"} {
		t.Run("device id "+id, func(t *testing.T) {
			b := newAgent(t, id)
			r := e.register(t, b, e.subject("owner-of-"+id)) // looks the device up by its path-escaped id
			if got := e.lookupKey(t, b.urlKey()); got.HumanID != r.humanID || got.RegisteredAt != r.registeredAt {
				t.Errorf("key lookup %+v, want human %s registered at %s", got, r.humanID, r.registeredAt)
			}
		})
	}
	t.Run("unknown device and key", func(t *testing.T) {
		e.expectUnregistered(t, newAgent(t, "never-seen"))
		if l := e.lookupDevice(t, strings.ToUpper(a.deviceID)); l.Registered { // device ids are exact strings
			t.Errorf("lookup of %q matched %q: %+v", strings.ToUpper(a.deviceID), a.deviceID, l)
		}
	})
	for name, key := range map[string]string{
		"not base64":     "!!!not-base64!!!",
		"stray percent":  "abc%25def",
		"mixed alphabet": url.PathEscape("ab+c-d_e/f"),
	} {
		t.Run("undecodable key "+name, func(t *testing.T) {
			resp := e.do(t, "GET", "/v1/agent/verify/public-key/"+key, nil)
			if resp.Status != http.StatusBadRequest {
				t.Fatalf("%s: status %d, want 400\nbody: %s", resp.Request, resp.Status, resp.Body)
			}
			if m := resp.Object(t); str(m["code"]) == "" || str(m["error"]) == "" {
				t.Errorf("%s: error body lacks error or code: %s", resp.Request, resp.Body)
			}
		})
	}
}

// TestVerifySignature checks POST /v1/agent/verify/signature.
func TestVerifySignature(t *testing.T) {
	t.Parallel()
	e := start(t, testserver.Options{})
	a := newAgent(t, "signer")
	e.register(t, a, e.subject("signer-owner"))
	stranger := newAgent(t, "stranger")
	now := time.Now().UnixMilli()

	for _, tc := range []struct {
		name                 string
		body                 map[string]any
		verified, registered bool
		skipRegistered       bool
	}{
		{name: "registered agent, any message", body: a.sign("any message at all", now), verified: true, registered: true},
		{name: "registered agent, registration form", body: a.registration(time.Now()), verified: true, registered: true},
		{name: "no age rule", body: a.sign("signed long ago", 1), verified: true, registered: true},
		{name: "timestamp not in message", body: a.sign("x-register-5", now), verified: true, registered: true},
		{name: "unregistered agent", body: stranger.sign("hello", now), verified: true, registered: false},
		{name: "registered device, another key", body: func() map[string]any {
			imp := newAgent(t, a.deviceID)
			return imp.sign("I am the signer", now)
		}(), verified: true, registered: false},
		{name: "registered key, another device", body: func() map[string]any {
			b := a.sign("hello", now)
			b["deviceId"] = "not-the-signer"
			return b
		}(), verified: true, registered: false},
		{name: "wrong signature", body: func() map[string]any {
			b := a.sign("hello", now)
			b["message"] = "hello!"
			return b
		}(), verified: false, skipRegistered: true},
		{name: "signature of another key", body: func() map[string]any {
			b := a.sign("hello", now)
			b["signature"] = stranger.sign("hello", now)["signature"]
			return b
		}(), verified: false, skipRegistered: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := e.do(t, "POST", "/v1/agent/verify/signature", tc.body).ExpectStatus(t, http.StatusOK).Object(t)
			v, ok1 := m["verified"].(bool)
			r, ok2 := m["registered"].(bool)
			if !ok1 || !ok2 {
				t.Fatalf("want booleans verified and registered: %v", m)
			}
			if v != tc.verified || (!tc.skipRegistered && r != tc.registered) {
				t.Errorf("got verified=%v registered=%v, want verified=%v registered=%v", v, r, tc.verified, tc.registered)
			}
		})
	}

	// A key found registered to no agent is remembered as such on Badger (the
	// second check and lookup are answered from memory); its registration shows
	// at once all the same.
	t.Run("unregistered, then registered", func(t *testing.T) {
		late := newAgent(t, "late-signer")
		check := func(want bool) {
			t.Helper()
			m := e.do(t, "POST", "/v1/agent/verify/signature", late.sign("hello", now)).ExpectStatus(t, http.StatusOK).Object(t)
			if m["verified"] != true || m["registered"] != want {
				t.Fatalf("verify/signature: %v, want verified, registered %v", m, want)
			}
			if got := e.lookupKey(t, late.urlKey()); got.Registered != want {
				t.Fatalf("lookup by key: %+v, want registered %v", got, want)
			}
		}
		check(false)
		hits, _ := scrapeMetrics(t, e).cacheCounts(t, "agent_absent_keys")
		check(false)
		// Answered from memory: the store the app holds is Badger's own, a
		// storage.Watcher (a wrapper would hide it and silently turn this off).
		if after, _ := scrapeMetrics(t, e).cacheCounts(t, "agent_absent_keys"); after-hits < 2 {
			t.Errorf("agent_absent_keys hits grew by %v over a signature check and a lookup of an unregistered key, want 2", after-hits)
		}
		e.register(t, late, e.subject("late-owner"))
		check(true)
	})

	for _, tc := range []struct {
		name   string
		body   any
		header []string
		status int
		code   string
		field  string
	}{
		{name: "not JSON", body: "nope", status: 400, code: "invalid_body"},
		{name: "missing signature", body: func() any { b := a.sign("m", now); delete(b, "signature"); return b }(), status: 400, code: "missing_field", field: "signature"},
		{name: "missing timestamp", body: func() any { b := a.sign("m", now); delete(b, "timestamp"); return b }(), status: 400, code: "missing_field", field: "timestamp"},
		{name: "bad key", body: func() any { b := a.sign("m", now); b["publicKey"] = "@@@"; return b }(), status: 400, code: "invalid_public_key", field: "publicKey"},
		{name: "P-256 key", body: func() any {
			k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
			b := a.sign("m", now)
			b["publicKey"] = base64.StdEncoding.EncodeToString(der)
			return b
		}(), status: 400, code: "invalid_public_key", field: "publicKey"},
		{name: "bad signature encoding", body: func() any { b := a.sign("m", now); b["signature"] = "***"; return b }(), status: 400, code: "invalid_signature", field: "signature"},
		{name: "short signature", body: func() any { b := a.sign("m", now); b["signature"] = "AAAA"; return b }(), status: 400, code: "invalid_signature", field: "signature"},
		{name: "empty message", body: a.sign("", now), status: 400, code: "invalid_field", field: "message"},
		{name: "timestamp zero", body: a.sign("m", 0), status: 400, code: "invalid_field", field: "timestamp"},
		{name: "deviceId a number", body: func() any { b := a.sign("m", now); b["deviceId"] = 1; return b }(), status: 400, code: "invalid_field", field: "deviceId"},
		{name: "text/plain", body: a.sign("m", now), header: []string{"Content-Type", "text/plain"}, status: 415, code: "unsupported_media_type"},
		{name: "message too long", body: a.sign(strings.Repeat("m", 20000), now), status: 400, code: "invalid_field", field: "message"},
		{name: "body over 64 KiB", body: a.sign(strings.Repeat("m", 70<<10), now), status: 413, code: "body_too_large"},
	} {
		t.Run("refused "+tc.name, func(t *testing.T) {
			e.do(t, "POST", "/v1/agent/verify/signature", tc.body, tc.header...).ExpectError(t, tc.status, tc.code, tc.field)
		})
	}
}

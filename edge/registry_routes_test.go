package edge_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRegistration: init answers 201 with the session and its page's URL; the
// status is pending until the owner's palm scan, then completed with the key; the
// owner's page shows the device and the key fingerprint, as HTML and JSON.
func TestRegistration(t *testing.T) {
	e := newEnv(t)
	a := newAgent("agent-one")
	w := e.postJSON(t, "/v1/agent/register/init", a.registration(e.clock.Now()))
	wantStatus(t, w, http.StatusCreated)
	m := decode(t, w)
	sessionID, _ := m["sessionId"].(string)
	if sessionID == "" || m["expiresAt"] == nil {
		t.Fatalf("init = %s, want sessionId and expiresAt", w.Body)
	}

	w = e.get(t, "/v1/agent/register/"+sessionID+"/status")
	wantStatus(t, w, http.StatusOK)
	if m := decode(t, w); m["status"] != "pending" || m["registration"] != nil {
		t.Errorf("status = %s, want pending", w.Body)
	}

	w = e.get(t, "/v1/agent/register/"+sessionID+"/verify")
	wantPage(t, w, http.StatusOK, "agent-one")
	if !strings.Contains(w.Body.String(), `id="fingerprint"`) || !strings.Contains(w.Body.String(), `id="qr"`) {
		t.Errorf("the owner's page lacks the fingerprint or the QR code:\n%s", w.Body)
	}
	w = e.getJSON(t, "/v1/agent/register/"+sessionID+"/verify")
	wantStatus(t, w, http.StatusOK)
	if m := decode(t, w); m["sessionId"] != sessionID || m["deviceId"] != "agent-one" || m["keyFingerprint"] == nil || m["status"] != "pending" {
		t.Errorf("the owner's page JSON = %s", w.Body)
	}

	id, nonce := e.registrationChallenge(t, sessionID)
	e.devScan(t, id, nonce, "alice")
	w = e.get(t, "/v1/agent/register/"+sessionID+"/status")
	wantStatus(t, w, http.StatusOK)
	m = decode(t, w)
	reg, _ := m["registration"].(map[string]any)
	if m["status"] != "completed" || m["deviceId"] != "agent-one" || reg["publicKey"] != a.publicKey() || reg["registeredAt"] == nil {
		t.Errorf("status = %s, want completed with the key", w.Body)
	}
	w = e.get(t, "/v1/agent/register/"+sessionID+"/verify")
	wantPage(t, w, http.StatusOK, "Registered.")
}

// TestRegistrationInitRefusals: each check of init has its status and code in the
// /v1 body.
func TestRegistrationInitRefusals(t *testing.T) {
	e := newEnv(t)
	a := newAgent("agent-one")
	now := e.clock.Now()
	ts := now.UnixMilli()
	msg := "agent-register-" + strconv.FormatInt(ts, 10)
	with := func(change func(map[string]any)) map[string]any {
		f := a.signed(msg, ts)
		change(f)
		return f
	}
	for _, tt := range []struct {
		name        string
		body        any
		status      int
		code, field string
	}{
		{"missing deviceId", with(func(f map[string]any) { delete(f, "deviceId") }), 400, "missing_field", "deviceId"},
		{"deviceId not a string", with(func(f map[string]any) { f["deviceId"] = 7 }), 400, "invalid_field", "deviceId"},
		{"key not base64", with(func(f map[string]any) { f["publicKey"] = "%%%" }), 400, "invalid_public_key", "publicKey"},
		{"signature too short", with(func(f map[string]any) { f["signature"] = base64.StdEncoding.EncodeToString(make([]byte, 10)) }), 400, "invalid_signature", "signature"},
		{"message form", a.signed("hello", ts), 400, "invalid_message", "message"},
		{"timestamp mismatch", with(func(f map[string]any) { f["timestamp"] = ts + 1 }), 400, "timestamp_mismatch", ""},
		{"timestamp too old", a.registration(now.Add(-6 * time.Minute)), 400, "timestamp_out_of_window", ""},
		{"signature of another key", with(func(f map[string]any) { f["signature"] = newAgent("other").signed(msg, ts)["signature"] }), 400, "signature_mismatch", ""},
		{"key twice", `{"deviceId":"a","deviceId":"b"}`, 400, "invalid_body", "deviceId"},
		{"not an object", `"x"`, 400, "invalid_body", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantV1Error(t, e.postJSON(t, "/v1/agent/register/init", tt.body), tt.status, tt.code, tt.field)
		})
	}
	t.Run("wrong Content-Type", func(t *testing.T) {
		w := e.do(t, req{method: http.MethodPost, target: "/v1/agent/register/init", body: string(mustJSON(t, a.registration(now))), contentType: "text/plain"})
		wantV1Error(t, w, http.StatusUnsupportedMediaType, "unsupported_media_type", "")
	})
	t.Run("replay", func(t *testing.T) {
		b := newAgent("agent-replay").registration(now)
		wantStatus(t, e.postJSON(t, "/v1/agent/register/init", b), http.StatusCreated)
		wantV1Error(t, e.postJSON(t, "/v1/agent/register/init", b), http.StatusBadRequest, "challenge_replayed", "")
	})
	t.Run("already registered", func(t *testing.T) {
		b := newAgent("agent-registered")
		e.register(t, b, "alice")
		e.clock.Advance(time.Millisecond) // another message
		wantV1Error(t, e.postJSON(t, "/v1/agent/register/init", b.registration(e.clock.Now())), http.StatusConflict, "already_registered", "")
	})
	t.Run("GET", func(t *testing.T) {
		w := e.get(t, "/v1/agent/register/init")
		wantV1Error(t, w, http.StatusMethodNotAllowed, "method_not_allowed", "")
		if w.Header().Get("Allow") != "POST" {
			t.Errorf("Allow = %q, want POST", w.Header().Get("Allow"))
		}
	})
	t.Run("unknown session", func(t *testing.T) {
		wantV1Error(t, e.get(t, "/v1/agent/register/00000000-0000-4000-8000-000000000000/status"), http.StatusNotFound, "session_not_found", "")
		wantV1Error(t, e.get(t, "/v1/agent/register/00000000-0000-4000-8000-000000000000/verify"), http.StatusNotFound, "session_not_found", "")
	})
}

// TestVerifySignature: any message the agent signed verifies; registered says
// whether that deviceId is registered with that key; a bad signature is
// verified:false, bad fields are 400.
func TestVerifySignature(t *testing.T) {
	e := newEnv(t)
	a := newAgent("agent-sig")
	check := func(body any) map[string]any {
		t.Helper()
		w := e.postJSON(t, "/v1/agent/verify/signature", body)
		wantStatus(t, w, http.StatusOK)
		return decode(t, w)
	}
	if m := check(a.signed("any message at all", 1)); m["verified"] != true || m["registered"] != false {
		t.Errorf("before registration: %v, want verified, not registered", m)
	}
	e.register(t, a, "alice")
	if m := check(a.signed("any message at all", 1)); m["verified"] != true || m["registered"] != true {
		t.Errorf("after registration: %v, want verified and registered", m)
	}
	bad := a.signed("any message at all", 1)
	bad["message"] = "another message"
	if m := check(bad); m["verified"] != false {
		t.Errorf("a signature over another message: %v, want verified:false", m)
	}
	other := newAgent("agent-sig").signed("x", 1)
	other["publicKey"] = newAgent("impostor").publicKey()
	other["signature"] = newAgent("impostor").signed("x", 1)["signature"]
	if m := check(other); m["registered"] != false {
		t.Errorf("the registered deviceId with another key: %v, want registered:false", m)
	}
	f := a.signed("m", 1)
	f["signature"] = "not base64!"
	wantV1Error(t, e.postJSON(t, "/v1/agent/verify/signature", f), http.StatusBadRequest, "invalid_signature", "signature")
	f = a.signed("m", 1)
	delete(f, "message")
	wantV1Error(t, e.postJSON(t, "/v1/agent/verify/signature", f), http.StatusBadRequest, "missing_field", "message")
}

// TestLookups: lookups by deviceId and by public key (standard base64 and
// base64url) find a registered agent and its human; an unknown one is 200 with
// registeredAt "never"; an undecodable key is 400.
func TestLookups(t *testing.T) {
	e := newEnv(t)
	a := newAgent("agent-look")
	e.register(t, a, "alice")
	key := a.publicKey()
	urlKey := base64.RawURLEncoding.EncodeToString(mustDecodeStd(t, key))
	var human any
	for _, target := range []string{
		"/v1/agent/verify/device/agent-look",
		"/v1/agent/verify/public-key/" + url.PathEscape(key),
		"/v1/agent/verify/public-key/" + urlKey,
	} {
		w := e.get(t, target)
		wantStatus(t, w, http.StatusOK)
		m := decode(t, w)
		if m["registered"] != true || m["verified"] != true || m["humanId"] == nil || m["registeredAt"] == "never" {
			t.Errorf("%s = %s, want the registered agent", target, w.Body)
		}
		if human == nil {
			human = m["humanId"]
		} else if m["humanId"] != human {
			t.Errorf("%s: humanId %v, want %v", target, m["humanId"], human)
		}
	}
	for _, target := range []string{"/v1/agent/verify/device/nobody", "/v1/agent/verify/public-key/" + url.PathEscape(newAgent("x").publicKey())} {
		w := e.get(t, target)
		wantStatus(t, w, http.StatusOK)
		if m := decode(t, w); m["registered"] != false || m["verified"] != false || m["registeredAt"] != "never" || m["humanId"] != nil {
			t.Errorf("%s = %s, want an unknown agent", target, w.Body)
		}
	}
	wantV1Error(t, e.get(t, "/v1/agent/verify/public-key/not-a-key"), http.StatusBadRequest, "invalid_public_key", "")
}

func mustDecodeStd(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("decoding %q: %v", s, err)
	}
	return b
}

// TestLeaderboard: humans with agents, most agents first, limited by ?limit=;
// a bad limit is 400 invalid_field naming limit.
func TestLeaderboard(t *testing.T) {
	e := newEnv(t)
	w := e.get(t, "/v1/human/leaderboard")
	wantStatus(t, w, http.StatusOK)
	if strings.TrimSpace(w.Body.String()) != "[]" {
		t.Errorf("empty leaderboard = %s, want []", w.Body)
	}
	e.register(t, newAgent("a1"), "alice")
	e.register(t, newAgent("a2"), "alice")
	e.register(t, newAgent("b1"), "bob")
	for _, tt := range []struct {
		query string
		want  []float64
	}{{"", []float64{2, 1}}, {"?limit=1", []float64{2}}, {"?limit=1000", []float64{2, 1}}} {
		w := e.get(t, "/v1/human/leaderboard"+tt.query)
		wantStatus(t, w, http.StatusOK)
		var list []map[string]any
		if err := jsonUnmarshal(w.Body.Bytes(), &list); err != nil {
			t.Fatalf("leaderboard%s: %v: %s", tt.query, err, w.Body)
		}
		if len(list) != len(tt.want) {
			t.Fatalf("leaderboard%s = %s, want %d entries", tt.query, w.Body, len(tt.want))
		}
		for i, n := range tt.want {
			if list[i]["agentCount"] != n || list[i]["humanId"] == nil || list[i]["earliestRegisteredAt"] == nil {
				t.Errorf("leaderboard%s[%d] = %v, want agentCount %v", tt.query, i, list[i], n)
			}
		}
	}
	for _, q := range []string{"0", "1001", "x", "-1"} {
		wantV1Error(t, e.get(t, "/v1/human/leaderboard?limit="+q), http.StatusBadRequest, "invalid_field", "limit")
	}
}

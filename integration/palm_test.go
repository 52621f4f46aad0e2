package integration

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/internal/testserver"
)

// attestor is a palm attestor: a name and a signing key.
type attestor struct {
	name   string
	method jwt.SigningMethod
	key    any    // private key
	spki   []byte // DER SPKI of the public key
}

func newEd25519Attestor(t *testing.T, name string) *attestor {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(pub)
	return &attestor{name: name, method: jwt.SigningMethodEdDSA, key: priv, spki: der}
}

func newP256Attestor(t *testing.T, name string) *attestor {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	return &attestor{name: name, method: jwt.SigningMethodES256, key: priv, spki: der}
}

// config is the attestor's global option line.
func (a *attestor) config() string {
	return "palm_attestor " + a.name + " " + base64.StdEncoding.EncodeToString(a.spki)
}

// claims are valid assertion claims by a for challenge c and palm subject sub.
func (a *attestor) claims(e *env, c challengeInfo, sub string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"iss": a.name, "aud": e.URL, "sub": sub,
		"challenge": c.ChallengeID, "nonce": c.Nonce,
		"iat": now.Unix(), "exp": now.Add(2 * time.Minute).Unix(),
	}
}

// sign makes a compact JWS of claims with a's key and algorithm.
func (a *attestor) sign(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	return signJWS(t, a.method, a.key, claims)
}

func signJWS(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatalf("signing an assertion: %v", err)
	}
	return s
}

// assert posts an assertion for challenge id.
func (e *env) assert(t *testing.T, challengeID string, body any) *testserver.Response {
	t.Helper()
	return e.do(t, "POST", "/v1/palm/challenges/"+challengeID+"/assertion", body)
}

// pending starts a registration for a fresh agent and returns its session and
// palm challenge.
func (e *env) pending(t *testing.T, deviceID string) (*agent, session, challengeInfo) {
	t.Helper()
	a := newAgent(t, deviceID)
	s := e.initSession(t, a.registration(time.Now()))
	return a, s, e.verifyInfo(t, s)
}

// expectPending checks that a refused completion left session and challenge pending.
func (e *env) expectPending(t *testing.T, a *agent, s session, c challengeInfo) {
	t.Helper()
	if got := e.challengeStatus(t, c); got != "pending" {
		t.Errorf("palm challenge status %q, want pending", got)
	}
	if st := e.status(t, s.ID); str(st["status"]) != "pending" {
		t.Errorf("session status %v, want pending", st["status"])
	}
	e.expectUnregistered(t, a)
}

// TestPalmAssertions drives palm challenges with assertions of configured
// Ed25519 and P-256 attestors, on a server without dev mode.
func TestPalmAssertions(t *testing.T) {
	t.Parallel()
	ed := newEd25519Attestor(t, "ed-engine")
	ec := newP256Attestor(t, "p256-engine")
	// rate_limit off: this test makes more than 120 writes a minute.
	e := start(t, testserver.Options{NoDev: true, Global: ed.config() + "\n" + ec.config() + "\nrate_limit off"})

	complete := func(t *testing.T, at *attestor, c challengeInfo, sub string) {
		t.Helper()
		m := e.assert(t, c.ChallengeID, map[string]any{"assertion": at.sign(t, at.claims(e, c, sub))}).
			ExpectStatus(t, http.StatusOK).Object(t)
		if str(m["status"]) != "verified" {
			t.Errorf("assertion answer %v, want status verified", m)
		}
	}

	t.Run("Ed25519 and P-256 attestors, humans per (attestor, subject)", func(t *testing.T) {
		person := e.subject("person")
		var humans []string
		for i, at := range []*attestor{ed, ed, ec} {
			a, s, c := e.pending(t, "palm-agent-"+at.name+string(rune('a'+i)))
			complete(t, at, c, person)
			st := e.status(t, s.ID)
			if str(st["status"]) != "completed" || str(st["deviceId"]) != a.deviceID {
				t.Fatalf("status after a verified assertion by %s: %v, want completed", at.name, st)
			}
			if got := e.challengeStatus(t, c); got != "verified" {
				t.Errorf("challenge status %q, want verified", got)
			}
			l := e.lookupDevice(t, a.deviceID)
			if !l.Registered || !l.Verified {
				t.Fatalf("lookup after a verified assertion by %s: %+v", at.name, l)
			}
			humans = append(humans, l.HumanID)
		}
		if humans[0] != humans[1] {
			t.Errorf("same subject via the same attestor gave two humans: %s, %s", humans[0], humans[1])
		}
		if humans[2] == humans[0] {
			t.Errorf("same subject via another attestor mapped to the same human %s: humans are per (attestor, subject)", humans[0])
		}
		counts := map[string]int{}
		for _, x := range e.leaderboard(t, "") {
			counts[x.HumanID] = x.AgentCount
		}
		if counts[humans[0]] != 2 || counts[humans[2]] != 1 {
			t.Errorf("leaderboard counts %v, want 2 for %s and 1 for %s", counts, humans[0], humans[2])
		}
	})

	other := newEd25519Attestor(t, ed.name) // same name, another key
	otherEC := newP256Attestor(t, ec.name)
	rogueEC, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, rogueEd, _ := ed25519.GenerateKey(rand.Reader)
	refusals := []struct {
		name   string
		jws    func(t *testing.T, c, another challengeInfo) string
		status int
	}{
		{"EdDSA bad signature", func(t *testing.T, c, _ challengeInfo) string {
			return other.sign(t, ed.claims(e, c, "x"))
		}, 401},
		{"ES256 bad signature", func(t *testing.T, c, _ challengeInfo) string {
			return otherEC.sign(t, ec.claims(e, c, "x"))
		}, 401},
		{"tampered payload", func(t *testing.T, c, another challengeInfo) string {
			good := strings.Split(ed.sign(t, ed.claims(e, c, "x")), ".")
			evil := strings.Split(ed.sign(t, ed.claims(e, another, "y")), ".")
			return good[0] + "." + evil[1] + "." + good[2]
		}, 401},
		{"unknown attestor", func(t *testing.T, c, _ challengeInfo) string {
			cl := ed.claims(e, c, "x")
			cl["iss"] = "nobody"
			return ed.sign(t, cl)
		}, 401},
		{"missing iss", func(t *testing.T, c, _ challengeInfo) string {
			cl := ed.claims(e, c, "x")
			delete(cl, "iss")
			return ed.sign(t, cl)
		}, 401},
		{"wrong aud", func(t *testing.T, c, _ challengeInfo) string {
			cl := ed.claims(e, c, "x")
			cl["aud"] = "https://id.example.com"
			return ed.sign(t, cl)
		}, 401},
		{"aud is the OIDC issuer", func(t *testing.T, c, _ challengeInfo) string {
			cl := ed.claims(e, c, "x")
			cl["aud"] = e.URL + "/oauth2"
			return ed.sign(t, cl)
		}, 401},
		{"expired", func(t *testing.T, c, _ challengeInfo) string {
			cl := ed.claims(e, c, "x")
			cl["iat"], cl["exp"] = time.Now().Add(-5*time.Minute).Unix(), time.Now().Add(-3*time.Minute).Unix()
			return ed.sign(t, cl)
		}, 401},
		{"exp more than 5 minutes after iat", func(t *testing.T, c, _ challengeInfo) string {
			cl := ed.claims(e, c, "x")
			cl["exp"] = time.Now().Add(6 * time.Minute).Unix()
			return ed.sign(t, cl)
		}, 401},
		{"missing exp", func(t *testing.T, c, _ challengeInfo) string {
			cl := ed.claims(e, c, "x")
			delete(cl, "exp")
			return ed.sign(t, cl)
		}, 401},
		{"wrong nonce", func(t *testing.T, c, another challengeInfo) string {
			cl := ed.claims(e, c, "x")
			cl["nonce"] = another.Nonce
			return ed.sign(t, cl)
		}, 401},
		{"missing nonce", func(t *testing.T, c, _ challengeInfo) string {
			cl := ed.claims(e, c, "x")
			delete(cl, "nonce")
			return ed.sign(t, cl)
		}, 401},
		{"assertion for another challenge", func(t *testing.T, _, another challengeInfo) string {
			return ed.sign(t, ed.claims(e, another, "x"))
		}, 401},
		{"missing challenge", func(t *testing.T, c, _ challengeInfo) string {
			cl := ed.claims(e, c, "x")
			delete(cl, "challenge")
			return ed.sign(t, cl)
		}, 401},
		{"ES256 for an Ed25519 attestor", func(t *testing.T, c, _ challengeInfo) string {
			return signJWS(t, jwt.SigningMethodES256, rogueEC, ed.claims(e, c, "x"))
		}, 401},
		{"EdDSA for a P-256 attestor", func(t *testing.T, c, _ challengeInfo) string {
			return signJWS(t, jwt.SigningMethodEdDSA, rogueEd, ec.claims(e, c, "x"))
		}, 401},
		{"alg none", func(t *testing.T, c, _ challengeInfo) string {
			return signJWS(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, ed.claims(e, c, "x"))
		}, 401},
		{"HS256 keyed with the attestor's public key", func(t *testing.T, c, _ challengeInfo) string {
			return signJWS(t, jwt.SigningMethodHS256, ed.spki, ed.claims(e, c, "x"))
		}, 401},
		{"HS256 keyed with the configured base64 key", func(t *testing.T, c, _ challengeInfo) string {
			return signJWS(t, jwt.SigningMethodHS256, []byte(base64.StdEncoding.EncodeToString(ec.spki)), ec.claims(e, c, "x"))
		}, 401},
		{"not a JWS", func(*testing.T, challengeInfo, challengeInfo) string { return "not-a-jws" }, 400},
		{"two segments", func(*testing.T, challengeInfo, challengeInfo) string { return "eyJhbGciOiJFZERTQSJ9.e30" }, 400},
		{"empty", func(*testing.T, challengeInfo, challengeInfo) string { return "" }, 400},
	}
	for _, tc := range refusals {
		t.Run("refused "+tc.name, func(t *testing.T) {
			a, s, c := e.pending(t, "refused-"+strings.ReplaceAll(tc.name, " ", "-"))
			_, anotherS, another := e.pending(t, "bystander-"+strings.ReplaceAll(tc.name, " ", "-"))
			resp := e.assert(t, c.ChallengeID, map[string]any{"assertion": tc.jws(t, c, another)})
			if resp.Status != tc.status {
				t.Errorf("%s: status %d, want %d\nbody: %s", resp.Request, resp.Status, tc.status, resp.Body)
			}
			if m := resp.Object(t); str(m["error"]) == "" {
				t.Errorf("%s: error body without an error message: %s", resp.Request, resp.Body)
			}
			e.expectPending(t, a, s, c)
			if got := e.challengeStatus(t, another); got != "pending" {
				t.Errorf("the other challenge: status %q, want pending", got)
			}
			if st := e.status(t, anotherS.ID); str(st["status"]) != "pending" {
				t.Errorf("the other session: %v, want pending", st)
			}
			// The refusal did not use the challenge up.
			complete(t, ed, c, e.subject("late"))
		})
	}

	t.Run("malformed bodies", func(t *testing.T) {
		a, s, c := e.pending(t, "malformed-bodies")
		for name, body := range map[string]any{
			"no assertion":      map[string]any{},
			"assertion number":  map[string]any{"assertion": 42},
			"not JSON":          "assertion=abc",
			"JSON array":        []any{ed.sign(t, ed.claims(e, c, "x"))},
			"assertion is null": map[string]any{"assertion": nil},
		} {
			if resp := e.assert(t, c.ChallengeID, body); resp.Status != http.StatusBadRequest {
				t.Errorf("%s: %s: status %d, want 400\nbody: %s", name, resp.Request, resp.Status, resp.Body)
			}
		}
		e.expectPending(t, a, s, c)
	})

	t.Run("unknown challenge", func(t *testing.T) {
		_, _, c := e.pending(t, "unknown-challenge")
		for _, id := range []string{"0b6f3a52-2a8e-4a51-9d8c-6f4c1d2e3f40", "not-a-uuid"} {
			cl := ed.claims(e, c, "x")
			cl["challenge"] = id // a valid assertion, for a challenge that does not exist
			jws := ed.sign(t, cl)
			if resp := e.assert(t, id, map[string]any{"assertion": jws}); resp.Status != http.StatusNotFound {
				t.Errorf("%s: status %d, want 404\nbody: %s", resp.Request, resp.Status, resp.Body)
			}
			if resp := e.do(t, "GET", "/v1/palm/challenges/"+id+"?nonce="+c.Nonce, nil); resp.Status != http.StatusNotFound {
				t.Errorf("%s: status %d, want 404", resp.Request, resp.Status)
			}
		}
		for name, q := range map[string]string{"wrong nonce": "?nonce=AAAAAAAAAAAAAAAAAAAAAAAA", "no nonce": "", "empty nonce": "?nonce="} {
			if resp := e.do(t, "GET", "/v1/palm/challenges/"+c.ChallengeID+q, nil); resp.Status != http.StatusNotFound {
				t.Errorf("GET challenge with %s: status %d, want 404\nbody: %s", name, resp.Status, resp.Body)
			}
		}
	})

	t.Run("completed at most once", func(t *testing.T) {
		a, s, c := e.pending(t, "twice")
		complete(t, ed, c, e.subject("first"))
		resp := e.assert(t, c.ChallengeID, map[string]any{"assertion": ed.sign(t, ed.claims(e, c, e.subject("second")))})
		if resp.Status != http.StatusConflict {
			t.Errorf("second assertion: status %d, want 409\nbody: %s", resp.Status, resp.Body)
		}
		if resp := e.do(t, "POST", "/v1/palm/challenges/"+c.ChallengeID+"/deny", map[string]any{"nonce": c.Nonce}); resp.Status != http.StatusConflict {
			t.Errorf("deny after verification: status %d, want 409\nbody: %s", resp.Status, resp.Body)
		}
		if st := e.status(t, s.ID); str(st["status"]) != "completed" {
			t.Errorf("session %v, want completed", st)
		}
		if l := e.lookupDevice(t, a.deviceID); !l.Registered {
			t.Errorf("lookup %+v, want registered", l)
		}
	})

	t.Run("deny", func(t *testing.T) {
		a, s, c := e.pending(t, "denied")
		deny := "/v1/palm/challenges/" + c.ChallengeID + "/deny"
		if resp := e.do(t, "POST", deny, map[string]any{"nonce": "AAAAAAAAAAAAAAAAAAAAAAAA"}); resp.Status != http.StatusNotFound {
			t.Errorf("deny with a wrong nonce: status %d, want 404\nbody: %s", resp.Status, resp.Body)
		}
		e.expectPending(t, a, s, c)
		m := e.do(t, "POST", deny, map[string]any{"nonce": c.Nonce}).ExpectStatus(t, http.StatusOK).Object(t)
		if str(m["status"]) != "denied" {
			t.Errorf("deny answer %v, want status denied", m)
		}
		if st := e.status(t, s.ID); str(st["status"]) != "failed" {
			t.Errorf("session after deny: %v, want failed", st)
		}
		if got := e.challengeStatus(t, c); got != "denied" {
			t.Errorf("challenge after deny: %q, want denied", got)
		}
		if got := e.verifyInfo(t, s).Status; got != "denied" {
			t.Errorf("verify page status after deny: %q, want denied", got)
		}
		resp := e.assert(t, c.ChallengeID, map[string]any{"assertion": ed.sign(t, ed.claims(e, c, "x"))})
		if resp.Status != http.StatusConflict {
			t.Errorf("assertion after deny: status %d, want 409\nbody: %s", resp.Status, resp.Body)
		}
		if resp := e.do(t, "POST", deny, map[string]any{"nonce": c.Nonce}); resp.Status != http.StatusConflict {
			t.Errorf("second deny: status %d, want 409\nbody: %s", resp.Status, resp.Body)
		}
		if st := e.status(t, s.ID); str(st["status"]) != "failed" {
			t.Errorf("session after the late assertion: %v, want failed", st)
		}
		e.expectUnregistered(t, a)
		// The owner can start over with a new session.
		e.initSession(t, a.registration(time.Now()))
	})

	t.Run("no dev-scan and no simulate button without dev", func(t *testing.T) {
		a, s, c := e.pending(t, "no-dev")
		resp := e.do(t, "POST", "/v1/palm/challenges/"+c.ChallengeID+"/dev-scan", map[string]any{"nonce": c.Nonce, "palmSubject": "x"})
		if resp.Status != http.StatusNotFound {
			t.Errorf("dev-scan without dev: status %d, want 404\nbody: %s", resp.Status, resp.Body)
		}
		e.expectPending(t, a, s, c)
		page := e.do(t, "GET", s.URL, nil, "Accept", "text/html").ExpectStatus(t, http.StatusOK)
		if strings.Contains(strings.ToLower(string(page.Body)), "simulate palm scan") || strings.Contains(string(page.Body), "dev-scan") {
			t.Errorf("the page offers a simulated scan without dev mode")
		}
	})
}

// TestPalmAssertionExpired checks that an assertion for an expired challenge is
// refused with 410 and leaves the session expired.
func TestPalmAssertionExpired(t *testing.T) {
	t.Parallel()
	ed := newEd25519Attestor(t, "ed-engine")
	// Long enough for the page to show the pending challenge on a loaded
	// machine; the wait is until the expiry the server set.
	e := start(t, testserver.Options{NoDev: true, Global: ed.config() + "\nregistration_session_ttl 10s"})
	a, s, c := e.pending(t, "too-late")
	if c.Status != "pending" {
		t.Fatalf("the page shows the challenge %q, want pending (expiresAt %s)", c.Status, c.ExpiresAt)
	}
	time.Sleep(time.Until(parseTime(t, c.ExpiresAt).Add(500 * time.Millisecond)))
	resp := e.assert(t, c.ChallengeID, map[string]any{"assertion": ed.sign(t, ed.claims(e, c, e.subject("late")))})
	if resp.Status != http.StatusGone {
		t.Errorf("assertion after expiry: status %d, want 410\nbody: %s", resp.Status, resp.Body)
	}
	if got := e.challengeStatus(t, c); got != "expired" {
		t.Errorf("challenge status %q, want expired", got)
	}
	if st := e.status(t, s.ID); str(st["status"]) != "expired" {
		t.Errorf("session %v, want expired", st)
	}
	e.expectUnregistered(t, a)
}

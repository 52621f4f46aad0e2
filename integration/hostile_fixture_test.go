package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

// hostileFixture is the server of the catalogue and the state it holds before
// the first hostile request, so that path parameters and tokens can aim at real
// and at fake things.
type hostileFixture struct {
	t           *testing.T
	e           *env
	shop, other oidcClient
	ec, ed      *attestor // palm attestors the test holds the keys of (P-256, Ed25519)

	agentA *agent         // registered
	bodyA  map[string]any // the registration challenge A was registered with
	chalA  challengeInfo  // A's palm challenge, verified
	agentB *agent         // with a pending registration
	sessB  session
	chalB  challengeInfo // B's palm challenge, pending
	agentX *agent        // never registered, no session

	answeredID  string    // an authorization request answered with a code
	loginChal   loginPage // its palm challenge, verified
	pendingID   string    // an authorization request waiting for its scan
	pendingChal loginPage
	tokens      hxTokens // shop's tokens for the logged-in person
	sub         string

	esKid, rsKid string
	esPub        *ecdsa.PublicKey
	rsPub        *rsa.PublicKey
}

// hxChallengeMaxAge is the catalogue server's challenge_max_age.
const hxChallengeMaxAge = time.Hour

// hxTokens are the tokens of one login.
type hxTokens struct{ access, id, refresh string }

func newHostileFixture(t *testing.T) *hostileFixture {
	t.Helper()
	f := &hostileFixture{
		t:    t,
		shop: newOIDCClient("shop", ""), other: newOIDCClient("other", ""),
		ec: newP256Attestor(t, "hostile-engine"), ed: newEd25519Attestor(t, "hostile-ed"),
	}
	// Lifetimes far longer than the test on a loaded machine: A's signed
	// registration must still be a replay (not out of its window), B's session
	// and the pending login still pending when the last case is sent, however
	// late that is, and the used code of the finished login still stored when the
	// record counts are compared (with the default 5m, a catalogue that took 335 s
	// beside another test run saw oidc/code go from 1 to 0).
	f.e = start(t, testserver.Options{Global: strings.Join([]string{
		"rate_limit off", "challenge_max_age " + hxChallengeMaxAge.String(), "registration_session_ttl 3h", "auth_code_ttl 3h", "login_ttl 3h",
		f.ec.config(), f.ed.config(), f.shop.config(), f.other.config(),
	}, "\n")})
	e := f.e

	// A registered agent, with the challenge it registered with.
	f.agentA = newAgent(t, "hostile-agent-a")
	f.bodyA = f.agentA.registration(time.Now())
	sA := e.initSession(t, f.bodyA)
	f.chalA = e.verifyInfo(t, sA)
	e.devScan(t, f.chalA, e.subject("owner")).ExpectStatus(t, http.StatusOK)
	if l := e.lookupDevice(t, f.agentA.deviceID); !l.Registered {
		t.Fatalf("agent A is not registered after its scan: %+v", l)
	}
	// A pending registration.
	f.agentB, f.sessB, f.chalB = e.pending(t, "hostile-agent-b")
	f.agentX = newAgent(t, "hostile-agent-x")

	// A finished login with its tokens, and a pending one.
	f.answeredID = e.authorize(t, e.authURL(f.shop, "state", "hostile"))
	f.loginChal = e.loginPageJSON(t, f.answeredID)
	e.scan(t, f.loginChal, e.subject("user"))
	q := e.finish(t, f.answeredID, f.shop.redirects[0])
	m := e.exchange(t, f.shop, q.Get("code"), "")
	f.tokens = hxTokens{access: str(m["access_token"]), id: str(m["id_token"]), refresh: str(m["refresh_token"])}
	if f.tokens.refresh == "" {
		t.Fatalf("no refresh token for scope offline_access: %v", m)
	}
	f.sub = str(jwtPart(t, f.tokens.access, 1)["sub"])
	f.pendingID = e.authorize(t, e.authURL(f.shop))
	f.pendingChal = e.loginPageJSON(t, f.pendingID)

	// The issuer's public keys.
	var set struct{ Keys []map[string]string }
	e.do(t, "GET", "/oauth2/jwks", nil).ExpectStatus(t, http.StatusOK).Decode(t, &set)
	for _, k := range set.Keys {
		switch k["alg"] {
		case "ES256":
			x, _ := base64.RawURLEncoding.DecodeString(k["x"])
			y, _ := base64.RawURLEncoding.DecodeString(k["y"])
			pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
			if err != nil {
				t.Fatalf("JWKS key %v: %v", k, err)
			}
			f.esKid, f.esPub = k["kid"], pub
		case "RS256":
			n, _ := base64.RawURLEncoding.DecodeString(k["n"])
			ex, _ := base64.RawURLEncoding.DecodeString(k["e"])
			f.rsKid, f.rsPub = k["kid"], &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(ex).Int64())}
		}
	}
	if f.esPub == nil || f.rsPub == nil {
		t.Fatalf("JWKS %v: want an ES256 and an RS256 key", set.Keys)
	}
	if kid := str(jwtPart(t, f.tokens.access, 0)["kid"]); kid != f.esKid {
		t.Fatalf("the access token's kid %q is not the JWKS's ES256 key %q", kid, f.esKid)
	}
	return f
}

// Payload families, crossed with the endpoints.
const (
	hxSQL    = `' OR 1=1 --`
	hxScript = `<script>alert(1)</script>`
	hxPasswd = `../../etc/passwd`
)

// hxPathPayloads are hostile values of a path parameter, escaped as they go in
// the path.
var hxPathPayloads = []struct{ name, path string }{
	{"SQL", "%27%20OR%201%3D1%20--"},
	{"script", "%3Cscript%3Ealert(1)%3C%2Fscript%3E"},
	{"escaped traversal", "..%2F..%2Fetc%2Fpasswd"},
	{"escaped dots traversal", "%2e%2e%2f%2e%2e%2fetc%2fpasswd"},
	{"NUL byte", "abc%00def"},
	{"10 KiB", strings.Repeat("a", 10<<10)},
	{"invalid UTF-8", "%ff%fe%fd"},
}

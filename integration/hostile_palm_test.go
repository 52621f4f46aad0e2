package integration

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"maps"
	"math/big"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// hxSegment encodes a JWS header or payload.
func hxSegment(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// hxSign makes a compact JWS of header and claims signed with method and key;
// header's alg is set to the method's.
func hxSign(t *testing.T, method jwt.SigningMethod, key any, header, claims map[string]any) string {
	t.Helper()
	h := maps.Clone(header)
	if h == nil {
		h = map[string]any{}
	}
	h["alg"] = method.Alg()
	input := hxSegment(h) + "." + hxSegment(claims)
	sig, err := method.Sign(input, key)
	if err != nil {
		t.Fatalf("signing with %s: %v", method.Alg(), err)
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// hxNone is an unsigned JWS (alg none, or the given spelling of it).
func hxNone(alg string, header, claims map[string]any) string {
	h := maps.Clone(header)
	if h == nil {
		h = map[string]any{}
	}
	h["alg"] = alg
	return hxSegment(h) + "." + hxSegment(claims) + "."
}

// hxHMAC signs header and claims with HS256 keyed with key, whatever it is.
func hxHMAC(header, claims map[string]any, key []byte) string {
	h := maps.Clone(header)
	if h == nil {
		h = map[string]any{}
	}
	h["alg"] = "HS256"
	input := hxSegment(h) + "." + hxSegment(claims)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(input))
	return input + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// hxDERSignature re-encodes a JWS ES256 signature (r||s) as ASN.1 DER.
func hxDERSignature(t *testing.T, token string) string {
	t.Helper()
	i := strings.LastIndex(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(token[i+1:])
	if err != nil || len(raw) != 64 {
		t.Fatalf("not an ES256 signature: %v", err)
	}
	der, _ := asn1.Marshal(struct{ R, S *big.Int }{new(big.Int).SetBytes(raw[:32]), new(big.Int).SetBytes(raw[32:])})
	return token[:i+1] + base64.RawURLEncoding.EncodeToString(der)
}

// ecPoint is x||y of a P-256 public key, and its uncompressed form.
func ecPoint(pub *ecdsa.PublicKey) (xy, uncompressed []byte) {
	b, err := pub.Bytes()
	if err != nil {
		panic(err)
	}
	return b[1:], b
}

func pemOf(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// hostilePalmCases are palm assertions that must be refused (forged, wrongly
// signed, with wrong claims, malformed) and denials and simulated scans that
// must fail, all aimed at B's pending challenge unless they say otherwise.
func hostilePalmCases(f *hostileFixture) []*hostileCase {
	t, e := f.t, f.e
	now := time.Now()
	target := "/v1/palm/challenges/" + f.chalB.ChallengeID
	base := func() jwt.MapClaims { return f.ec.claims(e, f.chalB, "eve") }
	with := func(kv ...any) map[string]any {
		c := base()
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(c, kv[i].(string))
			} else {
				c[kv[i].(string)] = kv[i+1]
			}
		}
		return c
	}
	signEC := func(claims map[string]any) string { return hxSign(t, jwt.SigningMethodES256, f.ec.key, nil, claims) }
	ecPriv := f.ec.key.(*ecdsa.PrivateKey)
	xy, uncompressed := ecPoint(&ecPriv.PublicKey)
	edPub := f.ed.key.(ed25519.PrivateKey).Public().(ed25519.PublicKey)

	otherEC, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	otherEC384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	_, otherEd, _ := ed25519.GenerateKey(rand.Reader)
	otherRSA, _ := rsa.GenerateKey(rand.Reader, 2048)
	otherJWK := map[string]any{"kty": "EC", "crv": "P-256",
		"x": base64.RawURLEncoding.EncodeToString(otherEC.X.FillBytes(make([]byte, 32))),
		"y": base64.RawURLEncoding.EncodeToString(otherEC.Y.FillBytes(make([]byte, 32)))}

	valid := base()
	validJWS := signEC(valid)
	otherJWS := signEC(with("sub", "mallory"))
	parts := strings.Split(validJWS, ".")
	padded := signEC(with("pad", strings.Repeat("p", 8<<10)))

	refused := []struct {
		name      string
		assertion string
	}{
		// The signature and its algorithm.
		{"alg none", hxNone("none", nil, valid)},
		{"alg none as the dev attestor", hxNone("none", nil, with("iss", "palmgate-dev"))},
		{"alg none, signature kept", hxNone("none", nil, valid) + parts[2]},
		{"HS256 keyed with the attestor's SPKI", hxHMAC(nil, valid, f.ec.spki)},
		{"HS256 keyed with the attestor's PEM", hxHMAC(nil, valid, pemOf(f.ec.spki))},
		{"HS256 keyed with the attestor's x||y", hxHMAC(nil, valid, xy)},
		{"HS256 keyed with the attestor's uncompressed point", hxHMAC(nil, valid, uncompressed)},
		{"HS256 keyed with the Ed25519 attestor's key", hxHMAC(nil, with("iss", f.ed.name), edPub)},
		{"HS256 with an empty key", hxHMAC(nil, valid, nil)},
		{"ES256 by another P-256 key", hxSign(t, jwt.SigningMethodES256, otherEC, nil, valid)},
		{"ES384 by a P-384 key", hxSign(t, jwt.SigningMethodES384, otherEC384, nil, valid)},
		{"EdDSA by another key for the P-256 attestor", hxSign(t, jwt.SigningMethodEdDSA, otherEd, nil, valid)},
		{"EdDSA by another key for the Ed25519 attestor", hxSign(t, jwt.SigningMethodEdDSA, otherEd, nil, with("iss", f.ed.name))},
		{"ES256 by the P-256 key for the Ed25519 attestor", signEC(with("iss", f.ed.name))},
		{"ES256 by the P-256 key as the dev attestor", signEC(with("iss", "palmgate-dev"))},
		{"RS256 by an RSA key", hxSign(t, jwt.SigningMethodRS256, otherRSA, nil, valid)},
		{"attacker key in a jwk header", hxSign(t, jwt.SigningMethodES256, otherEC, map[string]any{"jwk": otherJWK}, valid)},
		{"attacker key behind jku and kid", hxSign(t, jwt.SigningMethodES256, otherEC, map[string]any{"jku": "https://evil.example/jwks", "kid": "evil", "x5u": "https://evil.example/cert"}, valid)},
		{"signature stripped", parts[0] + "." + parts[1] + "."},
		{"signature of another assertion", parts[0] + "." + parts[1] + "." + strings.Split(otherJWS, ".")[2]},
		{"signature in DER", hxDERSignature(t, validJWS)},
		{"tampered signature", tamper(validJWS)},
		// The claims, signed with the attestor's own key.
		{"unknown attestor", signEC(with("iss", "evil-engine"))},
		{"no iss", signEC(with("iss", nil))},
		{"SQL in iss", signEC(with("iss", hxSQL))},
		{"wrong aud", signEC(with("aud", "https://evil.example"))},
		{"aud is the OIDC issuer", signEC(with("aud", e.URL+"/oauth2"))},
		{"aud list without the issuer", signEC(with("aud", []string{"https://evil.example", "palmgate"}))},
		{"no aud", signEC(with("aud", nil))},
		{"expired", signEC(with("iat", now.Add(-10*time.Minute).Unix(), "exp", now.Add(-6*time.Minute).Unix()))},
		{"expired a minute ago", signEC(with("iat", now.Add(-3*time.Minute).Unix(), "exp", now.Add(-time.Minute).Unix()))},
		// Hours ahead: still ahead when the case is sent on a loaded machine.
		{"iat in the future", signEC(with("iat", now.Add(3*time.Hour).Unix(), "exp", now.Add(3*time.Hour+2*time.Minute).Unix()))},
		{"nbf in the future", signEC(with("nbf", now.Add(3*time.Hour).Unix()))},
		{"lives 10 minutes", signEC(with("exp", now.Add(10*time.Minute).Unix()))},
		{"no exp", signEC(with("exp", nil))},
		{"no iat", signEC(with("iat", nil))},
		{"exp before iat", signEC(with("iat", now.Unix(), "exp", now.Add(-2*time.Minute).Unix()))},
		{"no sub", signEC(with("sub", nil))},
		{"empty sub", signEC(with("sub", ""))},
		{"no challenge", signEC(with("challenge", nil))},
		{"challenge of the pending login", signEC(with("challenge", f.pendingChal.ChallengeID))},
		{"SQL in challenge", signEC(with("challenge", hxSQL))},
		{"no nonce", signEC(with("nonce", nil))},
		{"wrong nonce", signEC(with("nonce", "AAAAAAAAAAAAAAAAAAAAAAAAAAAA"))},
		{"nonce of the pending login", signEC(with("nonce", f.pendingChal.Nonce))},
		{"SQL in nonce", signEC(with("nonce", hxSQL))},
		{"script in nonce", signEC(with("nonce", hxScript))},
	}
	var cases []*hostileCase
	for _, r := range refused {
		cases = append(cases, hx("assertion: "+r.name, "POST", target+"/assertion").json(map[string]any{"assertion": r.assertion}).v1(401, "assertion_refused"))
	}

	malformed := []struct{ name, assertion string }{
		// An algorithm jwt does not know is not a JWS palmgate can parse.
		{"alg None", hxNone("None", nil, valid)},
		{"alg XS256", hxNone("XS256", nil, valid) + parts[2]},
		{"no alg", hxSegment(map[string]any{"typ": "JWT"}) + "." + parts[1] + "." + parts[2]},
		{"empty", ""},
		{"not a JWS", "not-a-jws"},
		{"two segments", parts[0] + "." + parts[1]},
		{"four segments", validJWS + ".x"},
		{"header not base64", "!!!." + parts[1] + "." + parts[2]},
		{"header not JSON", base64.RawURLEncoding.EncodeToString([]byte("nope")) + "." + parts[1] + "." + parts[2]},
		{"claims not JSON", parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte("nope")) + "." + parts[2]},
		{"claims an array", parts[0] + "." + hxSegment([]int{1}) + "." + parts[2]},
		{"exp a string", signEC(with("exp", "tomorrow"))},
		{"longer than 8 KiB", padded},
		{"SQL", hxSQL},
		{"script", hxScript},
		{"NUL byte", parts[0] + "\x00." + parts[1] + "." + parts[2]},
	}
	for _, m := range malformed {
		cases = append(cases, hx("assertion malformed: "+m.name, "POST", target+"/assertion").json(map[string]any{"assertion": m.assertion}).v1(400, "invalid_assertion"))
	}
	for _, b := range []struct{ name, body string }{
		{"a number", `{"assertion":1}`}, {"an array", `{"assertion":["` + validJWS + `"]}`},
		{"an object", `{"assertion":{"alg":"none"}}`}, {"true", `{"assertion":true}`},
		{"invalid UTF-8", `{"assertion":"` + parts[0] + "\xff." + parts[1] + "." + parts[2] + `"}`},
	} {
		cases = append(cases, hx("assertion as "+b.name, "POST", target+"/assertion").json(b.body).v1(400, "invalid_body"))
	}

	// Valid assertions aimed at challenges that cannot take them, signed when sent:
	// an assertion lives 2 minutes, and the catalogue may take longer than that.
	unknown := "3f1c6a52-6c3e-4d0b-8f55-000000000001"
	cases = append(cases,
		hx("assertion for an unknown challenge", "POST", "/v1/palm/challenges/"+unknown+"/assertion").
			freshJSON(func() any { return map[string]any{"assertion": signEC(with("challenge", unknown))} }).v1(404, "challenge_not_found"),
		hx("assertion for A's verified challenge", "POST", "/v1/palm/challenges/"+f.chalA.ChallengeID+"/assertion").
			freshJSON(func() any { return map[string]any{"assertion": signEC(f.ec.claims(e, f.chalA, "eve"))} }).v1(409, "challenge_not_pending"),
		hx("Ed25519 assertion for A's verified challenge", "POST", "/v1/palm/challenges/"+f.chalA.ChallengeID+"/assertion").
			freshJSON(func() any { return map[string]any{"assertion": f.ed.sign(t, f.ed.claims(e, f.chalA, "eve"))} }).v1(409, "challenge_not_pending"),
		hx("assertion for the finished login's challenge", "POST", "/v1/palm/challenges/"+f.loginChal.ChallengeID+"/assertion").
			freshJSON(func() any {
				return map[string]any{"assertion": signEC(f.ec.claims(e, challengeInfo{ChallengeID: f.loginChal.ChallengeID, Nonce: f.loginChal.Nonce}, "eve"))}
			}).v1(409, "challenge_not_pending"),
		hx("B's assertion at A's challenge", "POST", "/v1/palm/challenges/"+f.chalA.ChallengeID+"/assertion").
			json(map[string]any{"assertion": validJWS}).v1(401, "assertion_refused"),
	)

	// Denials and simulated scans with the wrong nonce, or of ended challenges.
	nonces := []struct{ name, nonce string }{
		{"a wrong nonce", "AAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
		{"an empty nonce", ""},
		{"the pending login's nonce", f.pendingChal.Nonce},
		{"a NUL byte after the nonce", f.chalB.Nonce + "\x00"},
		{"a space after the nonce", f.chalB.Nonce + " "},
		{"the nonce in upper case", strings.ToUpper(f.chalB.Nonce)},
		{"an SQL nonce", hxSQL},
		{"a script nonce", hxScript},
		{"a nonce of 10 KiB", strings.Repeat("n", 10<<10)},
	}
	for _, n := range nonces {
		if n.nonce == f.chalB.Nonce {
			continue // all upper case already
		}
		cases = append(cases,
			hx("deny with "+n.name, "POST", target+"/deny").json(map[string]any{"nonce": n.nonce}).v1(404, "challenge_not_found"),
			hx("dev-scan with "+n.name, "POST", target+"/dev-scan").json(map[string]any{"nonce": n.nonce, "palmSubject": hxSQL}).v1(404, "challenge_not_found"),
			hx("scan URL with "+n.name, "GET", target+"?nonce="+url.QueryEscape(n.nonce)).v1(404, "challenge_not_found"),
		)
	}
	// right stands for B's current nonce: its cases are sent with the nonce of a
	// scan URL renewed right before them (see openScan).
	right := hxNonceB
	cases = append(cases,
		hx("deny without a nonce", "POST", target+"/deny").json(`{}`).v1(404, "challenge_not_found"),
		hx("deny with a numeric nonce", "POST", target+"/deny").json(`{"nonce":12}`).v1(400, "invalid_body"),
		hx("deny of A's verified challenge", "POST", "/v1/palm/challenges/"+f.chalA.ChallengeID+"/deny").json(map[string]any{"nonce": f.chalA.Nonce}).v1(409, "challenge_not_pending"),
		hx("deny of the finished login", "POST", "/v1/palm/challenges/"+f.loginChal.ChallengeID+"/deny").json(map[string]any{"nonce": f.loginChal.Nonce}).v1(409, "challenge_not_pending"),
		hx("dev-scan without a palmSubject", "POST", target+"/dev-scan").json(map[string]any{"nonce": right}).openScan().v1(400, "invalid_assertion"),
		hx("dev-scan with an empty palmSubject", "POST", target+"/dev-scan").json(map[string]any{"nonce": right, "palmSubject": ""}).openScan().v1(400, "invalid_assertion"),
		hx("dev-scan with a palmSubject of 129 bytes", "POST", target+"/dev-scan").json(map[string]any{"nonce": right, "palmSubject": strings.Repeat("s", 129)}).openScan().v1(400, "invalid_assertion"),
		hx("dev-scan with a palmSubject of 10 KiB", "POST", target+"/dev-scan").json(map[string]any{"nonce": right, "palmSubject": strings.Repeat("s", 10<<10)}).openScan().v1(400, "invalid_assertion"),
		hx("dev-scan with a numeric palmSubject", "POST", target+"/dev-scan").json(`{"nonce":"`+right+`","palmSubject":7}`).openScan().v1(400, "invalid_body"),
		hx("dev-scan with a palmSubject of invalid UTF-8", "POST", target+"/dev-scan").json(`{"nonce":"`+right+`","palmSubject":"eve`+"\xff\xfe"+`"}`).openScan().v1(400, "invalid_body"),
		hx("dev-scan of A's verified challenge", "POST", "/v1/palm/challenges/"+f.chalA.ChallengeID+"/dev-scan").json(map[string]any{"nonce": f.chalA.Nonce, "palmSubject": "eve"}).v1(409, "challenge_not_pending"),
		hx("dev-scan of the finished login", "POST", "/v1/palm/challenges/"+f.loginChal.ChallengeID+"/dev-scan").json(map[string]any{"nonce": f.loginChal.Nonce, "palmSubject": "eve"}).v1(409, "challenge_not_pending"),
		hx("scan URL without a nonce", "GET", target).v1(404, "challenge_not_found"),
		hx("scan URL with the nonce twice, a wrong one first", "GET", target+"?nonce=wrong&nonce="+hxNonceB).openScan().v1(404, "challenge_not_found"),
	)
	return cases
}

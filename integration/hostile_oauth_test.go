package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"maps"
	"net/url"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// hostileAuthorizeCases are refused authorization requests and login pages:
// each is a 400 (413 for a huge form) with the OAuth error body and never a
// redirect while the client or its redirect_uri is not known good, a 302 back to
// that redirect_uri with the error once both are; none stores anything.
func hostileAuthorizeCases(f *hostileFixture) []*hostileCase {
	authz := func(params ...string) string { return strings.TrimPrefix(f.e.authURL(f.shop, params...), f.e.URL) }
	valid := authz()
	query := strings.SplitN(valid, "?", 2)[1]
	pkce := strings.Repeat("a", 43)
	get := func(name, target string, code string) *hostileCase {
		return hx("authorize: "+name, "GET", target).oauth(400, code)
	}
	// back: refused once the client and its redirect_uri are valid, so sent back
	// to that redirect_uri (and still nothing stored).
	back := func(name, target string, code string) *hostileCase {
		return hx("authorize: "+name, "GET", target).back(f.shop.redirects[0], code)
	}
	cases := []*hostileCase{}
	for _, p := range []struct{ name, value string }{
		{"client_id", f.shop.id}, {"redirect_uri", url.QueryEscape(f.shop.redirects[0])}, {"response_type", "code"},
		{"scope", "openid"}, {"state", "again"}, {"nonce", "again"}, {"code_challenge_method", "S256"},
	} {
		answer := back
		if p.name == "client_id" || p.name == "redirect_uri" {
			answer = get
		}
		cases = append(cases, answer("duplicated "+p.name, valid+"&"+p.name+"="+p.value, "invalid_request"))
	}
	cases = append(cases,
		back("duplicated code_challenge", authz("code_challenge", pkce, "code_challenge_method", "S256")+"&code_challenge="+pkce, "invalid_request"),
		get("client_id twice, empty first", "/oauth2/authorize?client_id=&"+query, "invalid_request"),
		get("no client_id", authz("client_id", ""), "invalid_request"),
		get("unknown client_id", authz("client_id", "nobody"), "invalid_request"),
		get("SQL client_id", authz("client_id", hxSQL), "invalid_request"),
		get("script client_id", authz("client_id", hxScript), "invalid_request"),
		get("client_id with a NUL byte", authz("client_id", f.shop.id+"\x00"), "invalid_request"),
		get("client_id with a trailing space", authz("client_id", f.shop.id+" "), "invalid_request"),
		get("client_id of 10 KiB", authz("client_id", strings.Repeat("c", 10<<10)), "invalid_request"),
		get("client_id of invalid UTF-8", authz("client_id", "shop\xff"), "invalid_request"),
		get("client_id badly escaped", strings.Replace(valid, "client_id="+f.shop.id, "client_id=%zz", 1), "invalid_request"),
		get("no redirect_uri", authz("redirect_uri", ""), "invalid_request"),
		get("unregistered redirect_uri", authz("redirect_uri", "https://evil.example/callback"), "invalid_request"),
		get("javascript redirect_uri", authz("redirect_uri", "javascript:alert(1)"), "invalid_request"),
		get("data redirect_uri", authz("redirect_uri", "data:text/html,"+hxScript), "invalid_request"),
		get("redirect_uri with dot segments", authz("redirect_uri", f.shop.redirects[0]+"/../../evil"), "invalid_request"),
		get("redirect_uri with userinfo", authz("redirect_uri", strings.Replace(f.shop.redirects[0], "https://", "https://shop.example@evil.example/", 1)), "invalid_request"),
		get("redirect_uri with a fragment", authz("redirect_uri", f.shop.redirects[0]+"#frag"), "invalid_request"),
		get("redirect_uri extended", authz("redirect_uri", f.shop.redirects[0]+"x"), "invalid_request"),
		get("redirect_uri with a NUL byte", authz("redirect_uri", f.shop.redirects[0]+"\x00"), "invalid_request"),
		get("redirect_uri of the other client", authz("redirect_uri", f.other.redirects[0]), "invalid_request"),
		get("SQL redirect_uri", authz("redirect_uri", hxSQL), "invalid_request"),
		back("no response_type", authz("response_type", ""), "invalid_request"),
		back("response_type token", authz("response_type", "token"), "unsupported_response_type"),
		back("response_type CODE", authz("response_type", "CODE"), "unsupported_response_type"),
		back("SQL response_type", authz("response_type", hxSQL), "unsupported_response_type"),
		back("no scope", authz("scope", ""), "invalid_scope"),
		back("script scope", authz("scope", hxScript), "invalid_scope"),
		back("SQL scope", authz("scope", hxSQL), "invalid_scope"),
		back("quoted scope", authz("scope", `openid "admin"`), "invalid_scope"),
		back("backslash scope", authz("scope", `openid a\b`), "invalid_scope"),
		back("NUL byte in scope", authz("scope", "openid admin\x00"), "invalid_scope"),
		back("invalid UTF-8 scope", authz("scope", "openid \xff"), "invalid_scope"),
		back("21 scopes", authz("scope", "openid"+strings.Repeat(" s", 20)), "invalid_scope"),
		back("scope of 65 characters", authz("scope", "openid "+strings.Repeat("s", 65)), "invalid_scope"),
		back("state of 501 characters", authz("state", strings.Repeat("s", 501)), "invalid_request"),
		back("nonce of 501 characters", authz("nonce", strings.Repeat("n", 501)), "invalid_request"),
		get("script state with an unknown client", authz("state", hxScript, "client_id", "nobody"), "invalid_request"),
		back("code_challenge_method plain", authz("code_challenge", pkce, "code_challenge_method", "plain"), "invalid_request"),
		back("code_challenge without a method", authz("code_challenge", pkce), "invalid_request"),
		back("code_challenge_method without a challenge", authz("code_challenge_method", "S256"), "invalid_request"),
		back("code_challenge of 42 characters", authz("code_challenge", pkce[1:], "code_challenge_method", "S256"), "invalid_request"),
		back("script code_challenge", authz("code_challenge", hxScript+pkce, "code_challenge_method", "S256"), "invalid_request"),
		get("prompt=none with an unknown client", authz("prompt", "none", "client_id", "nobody"), "invalid_request"),
		hx("authorize: POST with a JSON body", "POST", "/oauth2/authorize").json(map[string]string{"client_id": f.shop.id}).oauth(400, "invalid_request"),
		hx("authorize: POST without Content-Type", "POST", "/oauth2/authorize").typed("", query).oauth(400, "invalid_request"),
		hx("authorize: POST as multipart", "POST", "/oauth2/authorize").typed("multipart/form-data; boundary=x", query).oauth(400, "invalid_request"),
		hx("authorize: POST with the parameters in the query", "POST", valid).form("").oauth(400, "invalid_request"),
		hx("authorize: POST form with client_id twice", "POST", "/oauth2/authorize").form(query+"&client_id="+f.shop.id).oauth(400, "invalid_request"),
		hx("authorize: POST form badly escaped", "POST", "/oauth2/authorize").form(query+"&state=%zz").oauth(400, "invalid_request"),
		hx("authorize: POST form of 64 KiB and more", "POST", "/oauth2/authorize").form(query+"&pad="+strings.Repeat("p", 64<<10)).oauth(413, "invalid_request"),
		hx("authorize: POST form of 1 MiB", "POST", "/oauth2/authorize").form(query+"&pad="+strings.Repeat("p", 1<<20)).oauth(413, "invalid_request"),
	)

	// The login page of unknown, malformed and answered requests.
	page := func(name, query string) *hostileCase {
		return hx("login page: "+name, "GET", "/oauth2/verify"+query).oauth(400, "invalid_request")
	}
	return append(cases,
		page("no auth_request_id", ""),
		page("empty auth_request_id", "?auth_request_id="),
		page("unknown auth_request_id", "?auth_request_id=5d7c3a30-0f1e-4b8c-9a3e-000000000000"),
		page("SQL auth_request_id", "?auth_request_id="+url.QueryEscape(hxSQL)),
		page("script auth_request_id", "?auth_request_id="+url.QueryEscape(hxScript)),
		page("traversal auth_request_id", "?auth_request_id=..%2F..%2Fetc%2Fpasswd"),
		page("NUL byte after the auth_request_id", "?auth_request_id="+f.pendingID+"%00"),
		page("auth_request_id of 10 KiB", "?auth_request_id="+strings.Repeat("a", 10<<10)),
		page("auth_request_id in braces", "?auth_request_id=%7B"+f.pendingID+"%7D"),
		page("auth_request_id without hyphens", "?auth_request_id="+strings.ReplaceAll(f.pendingID, "-", "")),
		page("the palm challenge id", "?auth_request_id="+f.pendingChal.ChallengeID),
		page("answered request", "?auth_request_id="+f.answeredID),
		page("answered request as JSON", "?auth_request_id="+f.answeredID).hdr("Accept", "application/json"),
		page("auth_request_id twice, garbage first", "?auth_request_id=x&auth_request_id="+f.pendingID),
	)
}

// hostileTokenCases are refused calls of the token, introspection and
// revocation endpoints.
func hostileTokenCases(f *hostileFixture) []*hostileCase {
	shop := "client_id=" + f.shop.id + "&client_secret=" + url.QueryEscape(f.shop.secret)
	other := "client_id=" + f.other.id + "&client_secret=" + url.QueryEscape(f.other.secret)
	refresh := "grant_type=refresh_token&refresh_token=" + f.tokens.refresh
	code := "grant_type=authorization_code&code=unknown-code&redirect_uri=" + url.QueryEscape(f.shop.redirects[0])
	basic := "Basic realm=\"palmgate\""
	var cases []*hostileCase
	tok := func(name, form string, status int, err string) *hostileCase {
		c := hx("token: "+name, "POST", "/oauth2/token").form(form).oauth(status, err)
		if status == 401 {
			c.challenge = "=" + basic
		}
		cases = append(cases, c)
		return c
	}
	// The body.
	cases = append(cases,
		hx("token: JSON body", "POST", "/oauth2/token").json(map[string]string{"grant_type": "refresh_token", "client_id": f.shop.id}).oauth(400, "invalid_request"),
		hx("token: no Content-Type", "POST", "/oauth2/token").typed("", refresh+"&"+shop).oauth(400, "invalid_request"),
		hx("token: text/plain", "POST", "/oauth2/token").typed("text/plain", refresh+"&"+shop).oauth(400, "invalid_request"),
		hx("token: multipart", "POST", "/oauth2/token").typed("multipart/form-data; boundary=x", refresh+"&"+shop).oauth(400, "invalid_request"),
		hx("token: form of 64 KiB and more", "POST", "/oauth2/token").form(refresh+"&"+shop+"&pad="+strings.Repeat("p", 64<<10)).oauth(413, "invalid_request"),
		hx("token: form of 1 MiB", "POST", "/oauth2/token").form(refresh+"&"+shop+"&pad="+strings.Repeat("p", 1<<20)).oauth(413, "invalid_request"),
		hx("token: parameters in the query", "POST", "/oauth2/token?"+refresh+"&"+shop).form("").oauth(401, "invalid_client"),
	)
	tok("badly escaped form", refresh+"&"+shop+"&x=%zz", 400, "invalid_request")
	for _, p := range []string{"grant_type=refresh_token", "client_id=" + f.shop.id, "client_secret=x", "refresh_token=x", "scope=openid&scope=openid"} {
		tok("duplicated "+strings.SplitN(p, "=", 2)[0], refresh+"&"+shop+"&"+p, 400, "invalid_request")
	}
	tok("duplicated code", code+"&code=x&"+shop, 400, "invalid_request")
	tok("duplicated redirect_uri", code+"&redirect_uri=x&"+shop, 400, "invalid_request")
	// Client authentication.
	tok("no client authentication", refresh, 401, "invalid_client")
	tok("wrong secret", refresh+"&client_id="+f.shop.id+"&client_secret=wrong", 401, "invalid_client")
	tok("empty secret", refresh+"&client_id="+f.shop.id+"&client_secret=", 401, "invalid_client")
	tok("the other client's secret", refresh+"&client_id="+f.shop.id+"&client_secret="+url.QueryEscape(f.other.secret), 401, "invalid_client")
	tok("unknown client", refresh+"&client_id=nobody&client_secret=x", 401, "invalid_client")
	tok("SQL client_id", refresh+"&client_id="+url.QueryEscape(hxSQL)+"&client_secret=x", 401, "invalid_client")
	tok("SQL secret", refresh+"&client_id="+f.shop.id+"&client_secret="+url.QueryEscape(hxSQL), 401, "invalid_client")
	tok("script client_id", refresh+"&client_id="+url.QueryEscape(hxScript)+"&client_secret=x", 401, "invalid_client")
	tok("NUL byte after the client_id", refresh+"&client_id="+f.shop.id+"%00&client_secret="+url.QueryEscape(f.shop.secret), 401, "invalid_client")
	tok("secret of 10 KiB", refresh+"&client_id="+f.shop.id+"&client_secret="+strings.Repeat("s", 10<<10), 401, "invalid_client")
	tok("secret with a NUL byte appended", refresh+"&client_id="+f.shop.id+"&client_secret="+url.QueryEscape(f.shop.secret)+"%00", 401, "invalid_client")
	tok("Basic with a wrong secret", refresh, 401, "invalid_client").hdr("Authorization", basicAuth(f.shop.id, "wrong"))
	tok("Basic not base64", refresh, 401, "invalid_client").hdr("Authorization", "Basic !!!not-base64")
	tok("Basic badly escaped", refresh, 401, "invalid_client").hdr("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("shop:%zz")))
	tok("Basic and a posted secret", refresh+"&client_secret="+url.QueryEscape(f.shop.secret), 400, "invalid_request").hdr("Authorization", basicAuth(f.shop.id, f.shop.secret))
	tok("Basic for another client_id than the form's", refresh+"&client_id="+f.other.id, 400, "invalid_request").hdr("Authorization", basicAuth(f.shop.id, f.shop.secret))
	// Grants.
	tok("no grant_type", shop, 400, "invalid_request")
	tok("grant_type password", "grant_type=password&username=admin&password=admin&"+shop, 400, "unsupported_grant_type")
	tok("grant_type client_credentials", "grant_type=client_credentials&"+shop, 400, "unsupported_grant_type")
	tok("grant_type implicit", "grant_type=implicit&"+shop, 400, "unsupported_grant_type")
	tok("SQL grant_type", "grant_type="+url.QueryEscape(hxSQL)+"&"+shop, 400, "unsupported_grant_type")
	tok("grant_type with a trailing space", "grant_type=refresh_token%20&refresh_token=x&"+shop, 400, "unsupported_grant_type")
	tok("no code", "grant_type=authorization_code&redirect_uri="+url.QueryEscape(f.shop.redirects[0])+"&"+shop, 400, "invalid_request")
	tok("no redirect_uri", "grant_type=authorization_code&code=x&"+shop, 400, "invalid_request")
	tok("unknown code", code+"&"+shop, 400, "invalid_grant")
	tok("SQL code", strings.Replace(code, "unknown-code", url.QueryEscape(hxSQL), 1)+"&"+shop, 400, "invalid_grant")
	tok("script code", strings.Replace(code, "unknown-code", url.QueryEscape(hxScript), 1)+"&"+shop, 400, "invalid_grant")
	tok("code of 10 KiB", strings.Replace(code, "unknown-code", strings.Repeat("c", 10<<10), 1)+"&"+shop, 400, "invalid_grant")
	tok("code traversal", strings.Replace(code, "unknown-code", url.QueryEscape(hxPasswd), 1)+"&"+shop, 400, "invalid_grant")
	tok("code_verifier of 42 characters", code+"&code_verifier="+strings.Repeat("v", 42)+"&"+shop, 400, "invalid_request")
	tok("no refresh_token", "grant_type=refresh_token&"+shop, 400, "invalid_request")
	tok("garbage refresh_token", "grant_type=refresh_token&refresh_token=garbage&"+shop, 400, "invalid_grant")
	tok("the other client's refresh_token", refresh+"&"+other, 400, "invalid_grant")
	tok("refresh with a script scope", refresh+"&scope="+url.QueryEscape(hxScript)+"&"+shop, 400, "invalid_scope")
	tok("refresh with a quoted scope", refresh+"&scope="+url.QueryEscape(`openid "x"`)+"&"+shop, 400, "invalid_scope")
	tok("refresh with 21 scopes", refresh+"&scope="+url.QueryEscape("openid"+strings.Repeat(" s", 20))+"&"+shop, 400, "invalid_scope")
	tok("refresh with a NUL byte in scope", refresh+"&scope=openid%00&"+shop, 400, "invalid_scope")
	for _, ft := range f.forgedRefreshTokens() {
		tok("forged refresh_token: "+ft.name, "grant_type=refresh_token&refresh_token="+url.QueryEscape(ft.token)+"&"+shop, 400, "invalid_grant")
	}

	// Introspection and revocation.
	for _, ep := range []string{"introspect", "revoke"} {
		path := "/oauth2/" + ep
		call := func(name, form string, status int, err string) *hostileCase {
			c := hx(ep+": "+name, "POST", path).form(form).oauth(status, err)
			if status == 401 {
				c.challenge = "=" + basic
			}
			cases = append(cases, c)
			return c
		}
		cases = append(cases,
			hx(ep+": JSON body", "POST", path).json(map[string]string{"token": f.tokens.access}).oauth(400, "invalid_request"),
			hx(ep+": form of 1 MiB", "POST", path).form(shop+"&token=x&pad="+strings.Repeat("p", 1<<20)).oauth(413, "invalid_request"),
		)
		call("no client authentication", "token="+f.tokens.access, 401, "invalid_client")
		call("wrong secret", "token=x&client_id="+f.shop.id+"&client_secret=wrong", 401, "invalid_client")
		call("SQL client_id", "token=x&client_id="+url.QueryEscape(hxSQL)+"&client_secret=x", 401, "invalid_client")
		call("no token", shop, 400, "invalid_request")
		call("empty token", shop+"&token=", 400, "invalid_request")
		call("duplicated token", shop+"&token=x&token="+f.tokens.access, 400, "invalid_request")
		call("duplicated client_id", shop+"&token=x&client_id="+f.other.id, 400, "invalid_request")
		call("badly escaped form", shop+"&token=%zz", 400, "invalid_request")
		call("Basic and a posted secret", "token=x&client_secret=x", 400, "invalid_request").hdr("Authorization", basicAuth(f.shop.id, f.shop.secret))
	}
	cases = append(cases,
		hx("revoke: the access token by the other client", "POST", "/oauth2/revoke").form(other+"&token="+f.tokens.access).oauth(400, "unauthorized_client"),
		hx("revoke: the refresh token by the other client", "POST", "/oauth2/revoke").form(other+"&token="+f.tokens.refresh+"&token_type_hint=refresh_token").oauth(400, "unauthorized_client"),
	)
	return cases
}

// forgedToken is a token that must be refused, and what it is.
type forgedToken struct{ name, token string }

// forgedAccessTokens are access tokens forged from the real one and the
// issuer's public keys: none may pass.
func (f *hostileFixture) forgedAccessTokens() []forgedToken {
	t, real := f.t, f.tokens.access
	parts := strings.Split(real, ".")
	h, p := jwtPart(t, real, 0), jwtPart(t, real, 1)
	hdr := func(kv ...any) map[string]any {
		m := maps.Clone(h)
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
			} else {
				m[kv[i].(string)] = kv[i+1]
			}
		}
		return m
	}
	claims := func(kv ...any) map[string]any {
		m := maps.Clone(p)
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
			} else {
				m[kv[i].(string)] = kv[i+1]
			}
		}
		return m
	}
	// kept re-encodes header and claims and keeps the real signature.
	kept := func(header, claims map[string]any) string {
		return hxSegment(header) + "." + hxSegment(claims) + "." + parts[2]
	}
	fresh, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	freshRSA, _ := rsa.GenerateKey(rand.Reader, 2048)
	byFresh := func(header, claims map[string]any) string {
		return hxSign(t, jwt.SigningMethodES256, fresh, header, claims)
	}
	xy, uncompressed := ecPoint(f.esPub)
	spki, _ := x509.MarshalPKIXPublicKey(f.esPub)
	rsaSPKI, _ := x509.MarshalPKIXPublicKey(f.rsPub)
	now := time.Now()
	freshJWK := map[string]any{"kty": "EC", "crv": "P-256", "kid": f.esKid,
		"x": base64.RawURLEncoding.EncodeToString(fresh.X.FillBytes(make([]byte, 32))),
		"y": base64.RawURLEncoding.EncodeToString(fresh.Y.FillBytes(make([]byte, 32)))}
	return []forgedToken{
		{"alg none", hxNone("none", h, p)},
		{"alg none, signature kept", hxNone("none", h, p) + parts[2]},
		{"alg NONE", hxNone("NONE", h, p)},
		{"HS256 keyed with the ES256 key's x||y", hxHMAC(h, p, xy)},
		{"HS256 keyed with the ES256 key's point", hxHMAC(h, p, uncompressed)},
		{"HS256 keyed with the ES256 key's SPKI", hxHMAC(h, p, spki)},
		{"HS256 keyed with the ES256 key's PEM", hxHMAC(h, p, pemOf(spki))},
		{"HS256 keyed with the RS256 key's PEM under its kid", hxHMAC(hdr("kid", f.rsKid), p, pemOf(rsaSPKI))},
		{"HS256 with an empty key", hxHMAC(h, p, nil)},
		{"kid swapped to the RS256 key", kept(hdr("kid", f.rsKid), p)},
		{"kid and alg swapped to RS256", kept(hdr("kid", f.rsKid, "alg", "RS256"), p)},
		{"RS256 by a fresh key under the RS256 kid", hxSign(t, jwt.SigningMethodRS256, freshRSA, hdr("kid", f.rsKid), p)},
		{"re-signed by a fresh key under the real kid", byFresh(h, p)},
		{"fresh key in a jwk header", byFresh(hdr("jwk", freshJWK), p)},
		{"fresh key behind jku", byFresh(hdr("jku", "https://evil.example/jwks.json"), p)},
		{"unknown kid", byFresh(hdr("kid", "no-such-key"), p)},
		{"no kid", byFresh(hdr("kid", nil), p)},
		{"kid path traversal", byFresh(hdr("kid", hxPasswd), p)},
		{"SQL kid", byFresh(hdr("kid", hxSQL), p)},
		{"exp edited into the past", kept(h, claims("exp", now.Add(-time.Hour).Unix()))},
		{"expired, fresh key", byFresh(h, claims("iat", now.Add(-2*time.Hour).Unix(), "exp", now.Add(-time.Hour).Unix()))},
		{"iat in the future, fresh key", byFresh(h, claims("iat", now.Add(time.Hour).Unix(), "exp", now.Add(2*time.Hour).Unix()))},
		{"nbf in the future, fresh key", byFresh(h, claims("nbf", now.Add(time.Hour).Unix()))},
		{"no exp, fresh key", byFresh(h, claims("exp", nil))},
		{"wrong iss, fresh key", byFresh(h, claims("iss", "https://evil.example/oauth2"))},
		{"wrong aud, fresh key", byFresh(h, claims("aud", "https://evil.example"))},
		{"typ JWT, fresh key", byFresh(hdr("typ", "JWT"), p)},
		{"typ edited to rt+jwt", kept(hdr("typ", "rt+jwt"), p)},
		{"typ removed", kept(hdr("typ", nil), p)},
		{"scope escalated", kept(h, claims("scope", "openid admin"))},
		{"sub swapped", kept(h, claims("sub", "attacker"))},
		{"client_id swapped", kept(h, claims("client_id", f.other.id))},
		{"the ID token", f.tokens.id},
		{"the refresh token", f.tokens.refresh},
		{"tampered signature", tamper(real)},
		{"truncated signature", real[:len(real)-8]},
		{"signature in DER", hxDERSignature(t, real)},
		{"two segments", parts[0] + "." + parts[1]},
		{"four segments", real + ".x"},
		{"header not JSON", base64.RawURLEncoding.EncodeToString([]byte("nope")) + "." + parts[1] + "." + parts[2]},
		{"garbage", "garbage"},
		{"SQL", hxSQL},
		{"script", hxScript},
	}
}

// forgedRefreshTokens are refresh tokens forged from the real one.
func (f *hostileFixture) forgedRefreshTokens() []forgedToken {
	t, real := f.t, f.tokens.refresh
	parts := strings.Split(real, ".")
	h, p := jwtPart(t, real, 0), jwtPart(t, real, 1)
	fresh, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	xy, _ := ecPoint(f.esPub)
	swapped := maps.Clone(h)
	swapped["kid"] = f.rsKid
	later := maps.Clone(p)
	later["exp"] = time.Now().Add(1000 * time.Hour).Unix()
	return []forgedToken{
		{"alg none", hxNone("none", h, p)},
		{"HS256 keyed with the ES256 key's x||y", hxHMAC(h, p, xy)},
		{"re-signed by a fresh key", hxSign(t, jwt.SigningMethodES256, fresh, h, p)},
		{"kid swapped to the RS256 key", hxSegment(swapped) + "." + parts[1] + "." + parts[2]},
		{"exp extended", parts[0] + "." + hxSegment(later) + "." + parts[2]},
		{"tampered signature", tamper(real)},
		{"the access token", f.tokens.access},
		{"the ID token", f.tokens.id},
	}
}

// hostileBearerCases send forged, foreign and missing tokens to userinfo and
// the forward-auth check.
func hostileBearerCases(f *hostileFixture) []*hostileCase {
	var cases []*hostileCase
	const invalid = `error="invalid_token"`
	const bare = `=Bearer realm="palmgate"`
	for i, ft := range f.forgedAccessTokens() {
		auth := "Bearer " + ft.token
		cases = append(cases,
			hx("userinfo: "+ft.name, "GET", "/oauth2/userinfo").hdr("Authorization", auth).bearer(401, "invalid_token", invalid),
			hx("check: "+ft.name, "GET", "/oauth2/check?scope=openid").hdr("Authorization", auth).bearer(401, "invalid_token", invalid),
		)
		if i%3 == 0 {
			cases = append(cases, hx("userinfo POST: "+ft.name, "POST", "/oauth2/userinfo").hdr("Authorization", auth).bearer(401, "invalid_token", invalid))
		}
	}
	for _, ep := range []struct{ name, method, path string }{
		{"userinfo", "GET", "/oauth2/userinfo"}, {"check", "POST", "/oauth2/check"},
	} {
		none := func(name string, header ...string) {
			cases = append(cases, hx(ep.name+": "+name, ep.method, ep.path).hdr(header...).bearer(401, "invalid_request", bare))
		}
		none("no Authorization")
		none("Basic credentials", "Authorization", basicAuth(f.shop.id, f.shop.secret))
		none("Bearer without a token", "Authorization", "Bearer")
		none("Bearer with spaces only", "Authorization", "Bearer    ")
		none("token of 9 KiB", "Authorization", "Bearer "+strings.Repeat("a", 9<<10))
		none("another scheme", "Authorization", "Token "+f.tokens.access)
		none("token in a cookie", "Cookie", "access_token="+f.tokens.access)
		cases = append(cases,
			hx(ep.name+": token in the query", ep.method, ep.path+"?access_token="+f.tokens.access).bearer(401, "invalid_request", bare),
			// RFC 6750 3.1: repeated credentials are invalid_request (third review, finding 2).
			hx(ep.name+": two Authorization headers, garbage first", ep.method, ep.path).
				hdr("Authorization", "Bearer garbage", "Authorization", "Bearer "+f.tokens.access).bearer(400, "invalid_request", `error="invalid_request"`),
			hx(ep.name+": two Authorization headers, the valid one first", ep.method, ep.path).
				hdr("Authorization", "Bearer "+f.tokens.access, "Authorization", "Bearer garbage").bearer(400, "invalid_request", `error="invalid_request"`),
		)
	}
	cases = append(cases,
		// A POST's form body may carry the token (RFC 6750 2.2; fourth review), but
		// not beside a header's, nor twice.
		hx("userinfo: garbage token in a form body", "POST", "/oauth2/userinfo").form("access_token=garbage").bearer(401, "invalid_token", `error="invalid_token"`),
		hx("userinfo: token in a form body and the header", "POST", "/oauth2/userinfo").form("access_token="+f.tokens.access).
			hdr("Authorization", "Bearer "+f.tokens.access).bearer(400, "invalid_request", `error="invalid_request"`),
		hx("userinfo: two tokens in a form body", "POST", "/oauth2/userinfo").form("access_token="+f.tokens.access+"&access_token=garbage").bearer(400, "invalid_request", `error="invalid_request"`),
	)
	// A real token without the scope the gateway asks for.
	for _, s := range []struct{ name, query string }{
		{"admin", "scope=admin"},
		{"openid and admin", "scope=openid%20admin"},
		{"two scope parameters", "scope=openid&scope=admin"},
		{"script", "scope=" + url.QueryEscape(hxScript)},
		{"SQL", "scope=" + url.QueryEscape(hxSQL)},
	} {
		cases = append(cases, hx("check: real token, scope "+s.name, "GET", "/oauth2/check?"+s.query).
			hdr("Authorization", "Bearer "+f.tokens.access).bearer(403, "insufficient_scope", `error="insufficient_scope"`))
	}
	// A scope that is not a scope token (RFC 6749 3.3) is never granted either,
	// and must not be echoed into the challenge's quoted string.
	for _, s := range []struct{ name, query string }{
		{"NUL byte", "scope=openid%00"},
		{"quote injecting a challenge parameter", "scope=" + url.QueryEscape(`x", error="invalid_token`)},
		{"backslash", "scope=" + url.QueryEscape(`a\b`)},
		{"DEL character", "scope=a%7F"},
		{"invalid UTF-8", "scope=a%FF"},
	} {
		cases = append(cases, hx("check: real token, scope with a "+s.name, "GET", "/oauth2/check?"+s.query).
			hdr("Authorization", "Bearer "+f.tokens.access).bearer(403, "insufficient_scope", `=Bearer realm="palmgate", error="insufficient_scope"`))
	}
	return cases
}

package integration

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// hostileMethodCases sends every endpoint the methods it does not serve.
func hostileMethodCases(f *hostileFixture) []*hostileCase {
	chal := "/v1/palm/challenges/" + f.chalB.ChallengeID
	routes := []struct{ name, path, allow string }{
		{"init", "/v1/agent/register/init", "POST"},
		{"status", "/v1/agent/register/" + f.sessB.ID + "/status", "GET"},
		{"registration page", "/v1/agent/register/" + f.sessB.ID + "/verify", "GET"},
		{"verify signature", "/v1/agent/verify/signature", "OPTIONS, POST"}, // OPTIONS: the public reads' CORS preflight (fourth review)
		{"device lookup", "/v1/agent/verify/device/" + f.agentA.deviceID, "GET, OPTIONS"},
		{"key lookup", "/v1/agent/verify/public-key/" + url.PathEscape(f.agentA.pub), "GET, OPTIONS"},
		{"leaderboard", "/v1/human/leaderboard", "GET, OPTIONS"},
		{"scan URL", chal + "?nonce=" + url.QueryEscape(f.chalB.Nonce), "GET"},
		{"assertion", chal + "/assertion", "POST"},
		{"deny", chal + "/deny", "POST"},
		{"dev-scan", chal + "/dev-scan", "POST"},
		{"authorize", strings.TrimPrefix(f.e.authURL(f.shop), f.e.URL), "GET, POST"},
		{"login page", "/oauth2/verify?auth_request_id=" + f.pendingID, "GET"},
		// OPTIONS: the CORS preflight of the endpoints browser apps call (issue 21)
		{"token", "/oauth2/token", "OPTIONS, POST"},
		{"userinfo", "/oauth2/userinfo", "GET, OPTIONS, POST"},
		{"discovery", "/oauth2/.well-known/openid-configuration", "GET, OPTIONS"},
		{"jwks", "/oauth2/jwks", "GET, OPTIONS"},
		{"introspect", "/oauth2/introspect", "POST"},
		{"revoke", "/oauth2/revoke", "OPTIONS, POST"},
	}
	var cases []*hostileCase
	for _, r := range routes {
		methods := []string{"PUT", "DELETE", "PATCH"}
		switch r.allow {
		case "GET", "GET, OPTIONS":
			methods = append(methods, "POST")
		case "POST", "OPTIONS, POST":
			methods = append(methods, "GET")
		}
		for _, m := range methods {
			cases = append(cases, hx(m+" at "+r.name, m, r.path).notAllowed(r.allow))
		}
	}
	return append(cases,
		hx("OPTIONS at init", "OPTIONS", "/v1/agent/register/init").notAllowed("POST"),
		hx("TRACE at token", "TRACE", "/oauth2/token").notAllowed("OPTIONS, POST"),
		hx("PROPFIND at the leaderboard", "PROPFIND", "/v1/human/leaderboard").notAllowed("GET, OPTIONS"),
		hx("lower-case get at the leaderboard", "get", "/v1/human/leaderboard").notAllowed("GET, OPTIONS"),
		hx("POST with a JSON body at the device lookup", "POST", "/v1/agent/verify/device/x").json(`{"registered":true}`).notAllowed("GET, OPTIONS"),
	)
}

// hostileRegistryCases are AgentChallenge bodies, well-formed JSON, with one
// hostile or wrong field each, at init and at verify/signature.
func hostileRegistryCases(f *hostileFixture) []*hostileCase {
	x := f.agentX
	now := time.Now()
	ms := now.UnixMilli()
	// initBody is a registration of X whose signature is over another message:
	// whatever else the case changes, it cannot register anything.
	initBody := func(mod func(m map[string]any)) map[string]any {
		m := x.registration(now)
		m["signature"] = base64.StdEncoding.EncodeToString(ed25519.Sign(x.priv, []byte("another message")))
		if mod != nil {
			mod(m)
		}
		return m
	}
	set := func(k string, v any) func(map[string]any) { return func(m map[string]any) { m[k] = v } }
	del := func(k string) func(map[string]any) { return func(m map[string]any) { delete(m, k) } }

	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	rsaDER, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKIXPublicKey(&ecKey.PublicKey)
	b64 := base64.StdEncoding.EncodeToString
	sig := func(n int) string { return b64(make([]byte, n)) }

	// Field mutations that make the challenge unparseable: the same answer at
	// init and at verify/signature.
	parse := []struct {
		name        string
		mod         func(map[string]any)
		code, field string
	}{
		{"without deviceId", del("deviceId"), "missing_field", "deviceId"},
		{"without publicKey", del("publicKey"), "missing_field", "publicKey"},
		{"without message", del("message"), "missing_field", "message"},
		{"without signature", del("signature"), "missing_field", "signature"},
		{"without timestamp", del("timestamp"), "missing_field", "timestamp"},
		{"deviceId null", set("deviceId", nil), "missing_field", "deviceId"},
		{"empty deviceId", set("deviceId", ""), "invalid_field", "deviceId"},
		{"NUL byte in deviceId", set("deviceId", "agent\x00admin"), "invalid_field", "deviceId"},
		{"deviceId of 257 bytes", set("deviceId", strings.Repeat("d", 257)), "invalid_field", "deviceId"},
		{"deviceId of 10 KiB", set("deviceId", strings.Repeat("d", 10<<10)), "invalid_field", "deviceId"},
		{"newline in deviceId", set("deviceId", "agent\nX-Injected: 1"), "invalid_field", "deviceId"},
		{"ANSI escape in deviceId", set("deviceId", "agent\x1b[31mred"), "invalid_field", "deviceId"},
		{"right-to-left override in deviceId", set("deviceId", "agent\u202egnp.exe"), "invalid_field", "deviceId"},
		{"zero-width space in deviceId", set("deviceId", "agent\u200b"), "invalid_field", "deviceId"},
		{"deviceId a number", set("deviceId", 42), "invalid_field", "deviceId"},
		{"deviceId an array", set("deviceId", []string{"a"}), "invalid_field", "deviceId"},
		{"deviceId an object", set("deviceId", map[string]any{"$ne": ""}), "invalid_field", "deviceId"},
		{"SQL in publicKey", set("publicKey", hxSQL), "invalid_public_key", "publicKey"},
		{"script in publicKey", set("publicKey", hxScript), "invalid_public_key", "publicKey"},
		{"path traversal in publicKey", set("publicKey", hxPasswd), "invalid_public_key", "publicKey"},
		{"RSA publicKey", set("publicKey", b64(rsaDER)), "invalid_public_key", "publicKey"},
		{"P-256 publicKey", set("publicKey", b64(ecDER)), "invalid_public_key", "publicKey"},
		{"raw Ed25519 publicKey, not SPKI", set("publicKey", b64(x.der[12:])), "invalid_public_key", "publicKey"},
		{"publicKey of 600 characters", set("publicKey", strings.Repeat("A", 600)), "invalid_public_key", "publicKey"},
		{"NUL byte in publicKey", set("publicKey", x.pub[:20]+"\x00"+x.pub[20:]), "invalid_public_key", "publicKey"},
		{"empty publicKey", set("publicKey", ""), "invalid_public_key", "publicKey"},
		{"publicKey mixing base64 alphabets", set("publicKey", "MCowBQYDK2VwAyEA+_"+x.pub[18:]), "invalid_public_key", "publicKey"},
		{"publicKey a number", set("publicKey", 7), "invalid_field", "publicKey"},
		{"empty message", set("message", ""), "invalid_field", "message"},
		{"message of 4097 bytes", set("message", strings.Repeat("m", 4097)), "invalid_field", "message"},
		{"message an object", set("message", map[string]any{}), "invalid_field", "message"},
		{"SQL in signature", set("signature", hxSQL), "invalid_signature", "signature"},
		{"script in signature", set("signature", hxScript), "invalid_signature", "signature"},
		{"signature of 63 bytes", set("signature", sig(63)), "invalid_signature", "signature"},
		{"signature of 65 bytes", set("signature", sig(65)), "invalid_signature", "signature"},
		{"empty signature", set("signature", ""), "invalid_signature", "signature"},
		{"signature of 10 KiB", set("signature", sig(10<<10)), "invalid_signature", "signature"},
		{"signature a number", set("signature", 1), "invalid_field", "signature"},
		{"timestamp a string", set("timestamp", fmt.Sprint(ms)), "invalid_field", "timestamp"},
		{"timestamp SQL", set("timestamp", hxSQL), "invalid_field", "timestamp"},
		{"timestamp a fraction", set("timestamp", 1.5), "invalid_field", "timestamp"},
		{"timestamp beyond int64", set("timestamp", 1e30), "invalid_field", "timestamp"},
		{"timestamp true", set("timestamp", true), "invalid_field", "timestamp"},
		{"negative timestamp", set("timestamp", -1), "invalid_field", "timestamp"},
		{"zero timestamp", set("timestamp", 0), "invalid_field", "timestamp"},
	}
	var cases []*hostileCase
	for _, p := range parse {
		cases = append(cases,
			hx("init: "+p.name, "POST", "/v1/agent/register/init").json(initBody(p.mod)).v1(400, p.code, p.field))
	}
	for i, p := range parse {
		if i%2 == 0 || strings.Contains(p.name, "without") { // every missing field, and every other mutation
			cases = append(cases,
				hx("verify signature: "+p.name, "POST", "/v1/agent/verify/signature").json(initBody(p.mod)).v1(400, p.code, p.field))
		}
	}

	// Registration rules, at init only (verify/signature has none of them).
	old := now.Add(-hxChallengeMaxAge - 10*time.Minute).UnixMilli()
	future := now.Add(hxChallengeMaxAge + 10*time.Minute).UnixMilli()
	a := f.agentA
	a2 := *a
	a2.deviceID = "hostile-agent-a2"
	rules := []struct {
		name        string
		body        map[string]any
		code, field string
	}{
		{"SQL in deviceId", initBody(set("deviceId", hxSQL)), "signature_mismatch", "signature"},
		{"script in deviceId", initBody(set("deviceId", hxScript)), "signature_mismatch", "signature"},
		{"path traversal in deviceId", initBody(set("deviceId", hxPasswd)), "signature_mismatch", "signature"},
		{"NUL byte in message", initBody(set("message", fmt.Sprintf("a\x00b-register-%d", ms))), "signature_mismatch", "signature"},
		{"SQL message, signed", x.sign(hxSQL, ms), "invalid_message", "message"},
		{"script message, signed", x.sign(hxScript, ms), "invalid_message", "message"},
		{"message without a prefix", x.sign(fmt.Sprintf("-register-%d", ms), ms), "invalid_message", "message"},
		{"message with a signed timestamp", x.sign(fmt.Sprintf("x-register-+%d", ms), ms), "invalid_message", "message"},
		{"message with a timestamp in hex", x.sign(fmt.Sprintf("x-register-0x%x", ms), ms), "invalid_message", "message"},
		{"message timestamp differs", x.sign(fmt.Sprintf("x-register-%d", ms+1), ms), "timestamp_mismatch", "timestamp"},
		{"timestamp 10 minutes out of the window, old", x.sign(fmt.Sprintf("x-register-%d", old), old), "timestamp_out_of_window", "timestamp"},
		{"timestamp 10 minutes out of the window, ahead", x.sign(fmt.Sprintf("x-register-%d", future), future), "timestamp_out_of_window", "timestamp"},
		{"signature by another key", initBody(nil), "signature_mismatch", "signature"},
		{"replay of A's registration", f.bodyA, "challenge_replayed", ""},
	}
	for _, r := range rules {
		cases = append(cases, hx("init: "+r.name, "POST", "/v1/agent/register/init").json(r.body).v1(400, r.code, r.field))
	}
	return append(cases,
		hx("init: registered deviceId again", "POST", "/v1/agent/register/init").json(a.registration(now)).v1(409, "already_registered"),
		hx("init: registered key under a new deviceId", "POST", "/v1/agent/register/init").json(a2.registration(now)).v1(409, "already_registered"),
	)
}

// jsonEndpoint is an endpoint that reads a JSON body, with a body it accepts as
// JSON (whatever else it then says about it).
type jsonEndpoint struct{ name, path, sample string }

func (f *hostileFixture) jsonEndpoints() []jsonEndpoint {
	chal := "/v1/palm/challenges/" + f.chalB.ChallengeID
	return []jsonEndpoint{
		{"init", "/v1/agent/register/init", `{"deviceId":"x"}`},
		{"verify signature", "/v1/agent/verify/signature", `{"deviceId":"x"}`},
		{"assertion", chal + "/assertion", `{"assertion":"x.y.z"}`},
		{"deny", chal + "/deny", `{"nonce":"wrong"}`},
		{"dev-scan", chal + "/dev-scan", `{"nonce":"wrong","palmSubject":"eve"}`},
	}
}

// hostileBodyCases cross body-level attacks (media types, sizes, nesting,
// encodings, not-an-object) with every JSON endpoint.
func hostileBodyCases(f *hostileFixture) []*hostileCase {
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	deepField := `{"x":` + strings.Repeat("[", 12000) + strings.Repeat("]", 12000) + `}`
	var cases []*hostileCase
	for _, ep := range f.jsonEndpoints() {
		add := func(name string, c *hostileCase) {
			c.name = ep.name + ": " + name
			cases = append(cases, c)
		}
		post := func() *hostileCase { return hx("", "POST", ep.path) }
		for _, ct := range []struct{ name, ct string }{
			{"no Content-Type", ""},
			{"text/plain", "text/plain"},
			{"form Content-Type", "application/x-www-form-urlencoded"},
			{"multipart Content-Type", "multipart/form-data; boundary=xyz"},
			{"application/jsonp", "application/jsonp"},
			{"malformed Content-Type", "application/json; charset"},
		} {
			add(ct.name, post().typed(ct.ct, ep.sample).v1(415, "unsupported_media_type"))
		}
		padded := ep.sample[:len(ep.sample)-1] + `,"pad":"` + strings.Repeat("p", 64<<10) + `"}`
		add("body of 64 KiB and more", post().json(padded).v1(413, "body_too_large"))
		add("body of 1 MiB", post().json(`{"x":"`+strings.Repeat("x", 1<<20)+`"}`).v1(413, "body_too_large"))
		for _, b := range []struct{ name, body string }{
			{"empty body", ""},
			{"body not JSON", "deviceId=x&nonce=y"},
			{"truncated JSON", ep.sample[:len(ep.sample)-3]},
			{"array body", `[` + ep.sample + `]`},
			{"string body", `"` + ep.sample + `"`},
			{"number body", `12345`},
			{"null body", `null`},
			{"two objects", ep.sample + ep.sample},
			{"data after the object", ep.sample + "x"},
			{"10000 nested arrays", deep},
			{"12000 nested arrays in a field", deepField},
			{"invalid UTF-8 in a key", "{\"\xff\xfe\":1," + ep.sample[1:]},
			{"UTF-8 byte order mark", "\xef\xbb\xbf" + ep.sample},
			{"UTF-16 body", "\xff\xfe{\x00}\x00"},
			{"single quotes", strings.ReplaceAll(ep.sample, `"`, `'`)},
			{"comment in JSON", `/* x */` + ep.sample},
		} {
			add(b.name, post().json(b.body).v1(400, "invalid_body"))
		}
		// A key given twice: encoding/json keeps the last, a reader in front of
		// palmgate may keep the first. Refused whatever the key.
		first, _, _ := strings.Cut(ep.sample[2:], `"`)
		add("key given twice", post().json(`{"`+first+`":"x",`+ep.sample[1:]).v1(400, "invalid_body", first))
		add("unknown key given twice", post().json(`{"pad":1,"pad":2,`+ep.sample[1:]).v1(400, "invalid_body", "pad"))
	}
	return append(cases, hostileKeyCases(f)...)
}

// withKeys is body as a JSON object with the raw members pairs (`"key":value`)
// put first: keys encoding/json cannot express in a map, such as a repeated one.
func withKeys(body map[string]any, pairs ...string) string {
	b, err := json.Marshal(body)
	if err != nil {
		panic(err)
	}
	if len(body) == 0 {
		return "{" + strings.Join(pairs, ",") + "}"
	}
	return "{" + strings.Join(pairs, ",") + "," + string(b[1:])
}

// quoted is v as a JSON string.
func quoted(v string) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// hostileKeyCases are bodies that would have done something under encoding/json's
// key matching (case-insensitive, last duplicate wins): a valid registration, a
// denial, a scan or an assertion of B's pending challenge, carried by a case
// variant or a repeated key. Keys must match exactly, and a repeated key is refused.
func hostileKeyCases(f *hostileFixture) []*hostileCase {
	x := f.agentX
	now := time.Now()
	chal := "/v1/palm/challenges/" + f.chalB.ChallengeID
	// caseVariant is m with every key capitalised: no field is present.
	caseVariant := func(m map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range m {
			out[strings.ToUpper(k[:1])+k[1:]] = v
		}
		return out
	}
	reg := func() map[string]any { return x.registration(now) }
	validJWS := f.ec.sign(f.t, f.ec.claims(f.e, f.chalB, "eve"))
	nonce := f.chalB.Nonce
	return []*hostileCase{
		hx("init: every key capitalised", "POST", "/v1/agent/register/init").json(caseVariant(reg())).v1(400, "missing_field", "deviceId"),
		hx("init: DEVICEID for deviceId", "POST", "/v1/agent/register/init").json(func() string {
			m := reg()
			id := m["deviceId"]
			delete(m, "deviceId")
			return withKeys(m, `"DEVICEID":`+quoted(fmt.Sprint(id)))
		}()).v1(400, "missing_field", "deviceId"),
		hx("init: deviceId twice", "POST", "/v1/agent/register/init").json(func() string {
			m := reg()
			return withKeys(m, `"deviceId":"hostile-other-device"`)
		}()).v1(400, "invalid_body", "deviceId"),
		hx("init: signature twice", "POST", "/v1/agent/register/init").json(func() string {
			m := reg()
			return withKeys(m, `"signature":`+quoted(base64.StdEncoding.EncodeToString(make([]byte, 64))))
		}()).v1(400, "invalid_body", "signature"),
		hx("verify signature: message twice", "POST", "/v1/agent/verify/signature").json(func() string {
			m := x.sign("signed message", now.UnixMilli())
			return withKeys(m, `"message":"another message"`)
		}()).v1(400, "invalid_body", "message"),
		hx("verify signature: every key capitalised", "POST", "/v1/agent/verify/signature").
			json(caseVariant(x.sign("signed message", now.UnixMilli()))).v1(400, "missing_field", "deviceId"),
		hx("deny: NONCE", "POST", chal+"/deny").json(map[string]any{"NONCE": nonce}).v1(404, "challenge_not_found"),
		hx("deny: nonce twice", "POST", chal+"/deny").json(withKeys(map[string]any{"nonce": nonce}, `"nonce":"wrong"`)).v1(400, "invalid_body", "nonce"),
		hx("dev-scan: Nonce", "POST", chal+"/dev-scan").json(map[string]any{"Nonce": nonce, "palmSubject": "eve"}).v1(404, "challenge_not_found"),
		hx("dev-scan: palmSubject twice", "POST", chal+"/dev-scan").
			json(withKeys(map[string]any{"nonce": nonce, "palmSubject": "eve"}, `"palmSubject":"mallory"`)).v1(400, "invalid_body", "palmSubject"),
		hx("assertion: Assertion", "POST", chal+"/assertion").json(map[string]any{"Assertion": validJWS}).v1(400, "invalid_assertion"),
		hx("assertion: assertion twice", "POST", chal+"/assertion").
			json(withKeys(map[string]any{"assertion": validJWS}, `"assertion":"x.y.z"`)).v1(400, "invalid_body", "assertion"),
	}
}

// hostilePathCases put hostile values and dot segments in path parameters.
func hostilePathCases(f *hostileFixture) []*hostileCase {
	var cases []*hostileCase
	chalBody := map[string]any{"nonce": f.chalB.Nonce, "palmSubject": "eve"}
	assertion := map[string]any{"assertion": f.ec.sign(f.t, f.ec.claims(f.e, f.chalB, "eve"))}
	payloads := append([]struct{ name, path string }{
		{"unknown uuid", "0b0e4a4e-4c7e-4f5e-9d3a-000000000000"},
	}, hxPathPayloads...)
	for _, p := range payloads {
		cases = append(cases,
			hx("status of session "+p.name, "GET", "/v1/agent/register/"+p.path+"/status").v1(404, "session_not_found"),
			hx("registration page of session "+p.name, "GET", "/v1/agent/register/"+p.path+"/verify").v1(404, "session_not_found"),
			hx("scan URL of challenge "+p.name, "GET", "/v1/palm/challenges/"+p.path+"?nonce="+url.QueryEscape(f.chalB.Nonce)).v1(404, "challenge_not_found"),
			hx("deny of challenge "+p.name, "POST", "/v1/palm/challenges/"+p.path+"/deny").json(chalBody).v1(404, "challenge_not_found"),
			hx("dev-scan of challenge "+p.name, "POST", "/v1/palm/challenges/"+p.path+"/dev-scan").json(chalBody).v1(404, "challenge_not_found"),
			// B's assertion is about B's challenge: posted elsewhere it names another one.
			hx("B's assertion at challenge "+p.name, "POST", "/v1/palm/challenges/"+p.path+"/assertion").json(assertion).v1(401, "assertion_refused"),
			hx("key lookup of "+p.name, "GET", "/v1/agent/verify/public-key/"+p.path).v1(400, "invalid_public_key", "publicKey"),
		)
	}
	cases = append(cases,
		hx("registration page of session with Accept JSON, SQL", "GET", "/v1/agent/register/%27%20OR%20%27%27%3D%27/verify").hdr("Accept", "application/json").v1(404, "session_not_found"),
		hx("status of B's session with a NUL byte appended", "GET", "/v1/agent/register/"+f.sessB.ID+"%00/status").v1(404, "session_not_found"),
		hx("status of B's session with a space appended", "GET", "/v1/agent/register/"+f.sessB.ID+"%20/status").v1(404, "session_not_found"),
		hx("status of B's palm challenge id", "GET", "/v1/agent/register/"+f.chalB.ChallengeID+"/status").v1(404, "session_not_found"),
		hx("scan URL of B's session id", "GET", "/v1/palm/challenges/"+f.sessB.ID+"?nonce="+url.QueryEscape(f.chalB.Nonce)).v1(404, "challenge_not_found"),
	)

	// deviceId lookups: unprintable or over-long ids are 400; printable ones are
	// valid deviceIds, unknown here (200 by contract), and reveal nothing.
	for _, d := range []struct{ name, path string }{
		{"NUL byte", "agent%00admin"},
		{"10 KiB", strings.Repeat("d", 10<<10)},
		{"257 bytes", strings.Repeat("d", 257)},
		{"invalid UTF-8", "%ff%fe%fd"},
		{"newline", "agent%0d%0aX-Injected:%201"},
		{"ANSI escape", "agent%1b%5b31m"},
		{"right-to-left override", "agent%e2%80%aegnp.exe"},
		{"tab", "agent%09b"},
	} {
		cases = append(cases, hx("device lookup of "+d.name, "GET", "/v1/agent/verify/device/"+d.path).v1(400, "invalid_field", "deviceId"))
	}
	for _, d := range []struct{ name, path string }{
		{"SQL", "%27%20OR%201%3D1%20--"},
		{"script", "%3Cscript%3Ealert(1)%3C%2Fscript%3E"},
		{"escaped traversal", "..%2F..%2Fetc%2Fpasswd"},
		{"escaped dots traversal", "%2e%2e%2f%2e%2e%2fetc%2fpasswd"},
	} {
		cases = append(cases, hx("device lookup of "+d.name+" (unknown agent)", "GET", "/v1/agent/verify/device/"+d.path).unknownAgent())
	}
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 1024)
	rsaDER, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKIXPublicKey(&ecKey.PublicKey)
	cases = append(cases,
		hx("key lookup of an RSA key", "GET", "/v1/agent/verify/public-key/"+url.PathEscape(base64.StdEncoding.EncodeToString(rsaDER))).v1(400, "invalid_public_key", "publicKey"),
		hx("key lookup of a P-256 key", "GET", "/v1/agent/verify/public-key/"+base64.RawURLEncoding.EncodeToString(ecDER)).v1(400, "invalid_public_key", "publicKey"),
		hx("key lookup of a raw Ed25519 key", "GET", "/v1/agent/verify/public-key/"+base64.RawURLEncoding.EncodeToString(f.agentA.der[12:])).v1(400, "invalid_public_key", "publicKey"),
		hx("key lookup mixing base64 alphabets", "GET", "/v1/agent/verify/public-key/"+url.PathEscape(strings.Replace(f.agentA.pub, "A", "_", 1))+"%2B").v1(400, "invalid_public_key", "publicKey"),
		hx("key lookup of an unknown key (unknown agent)", "GET", "/v1/agent/verify/public-key/"+f.agentX.urlKey()).unknownAgent(),
	)

	// Dot segments and empty segments: never a redirect out of the API. The 404 is
	// in the path's dialect: OAuth's invalid_request under /oauth2 (fourth review).
	notFound := func(name, method, target string) *hostileCase {
		if strings.HasPrefix(target, "/oauth2/") {
			return hx(name, method, target).oauth(404, "invalid_request")
		}
		return hx(name, method, target).v1(404, "not_found")
	}
	wrongNonce := map[string]any{"nonce": "wrong", "palmSubject": "eve"}
	cases = append(cases,
		notFound("dot segments out of /v1", "GET", "/v1/../etc/passwd"),
		notFound("dot segments out of /oauth2", "GET", "/oauth2/../../etc/passwd"),
		notFound("dot segments in the session id", "GET", "/v1/agent/register/../../../etc/passwd/status"),
		notFound("dot segments in the deviceId", "GET", "/v1/agent/verify/device/../../../../etc/passwd"),
		notFound("dot segments in the public key", "GET", "/v1/agent/verify/public-key/../../../etc/passwd"),
		notFound("dot segments in the challenge id", "GET", "/v1/palm/challenges/../../../etc/passwd?nonce=x"),
		hx("dot segments back to B's deny", "POST", "/v1/palm/challenges/"+f.chalB.ChallengeID+"/../"+f.chalB.ChallengeID+"/deny").json(wrongNonce).v1(404, "not_found"),
		hx("dot segments into init", "POST", "/v1/agent/verify/../register/init").json(`{}`).v1(404, "not_found"),
		notFound("a dot segment in the leaderboard path", "GET", "/v1/./human/leaderboard"),
		notFound("a trailing dot segment", "GET", "/v1/human/leaderboard/."),
		notFound("an empty segment", "GET", "/v1//human/leaderboard"),
		notFound("dot segments to the JWKS", "GET", "/oauth2/.well-known/../jwks"),
		notFound("escaped dot segments out of /v1", "GET", "/v1/%2e%2e/%2e%2e/etc/passwd"),
		notFound("backslash traversal", "GET", "/v1/..%5c..%5cetc%5cpasswd"),
		notFound("unknown /v1 endpoint", "GET", "/v1/admin"),
		notFound("unknown /oauth2 endpoint", "POST", "/oauth2/register"),
		notFound("init with a trailing slash", "POST", "/v1/agent/register/init/"),
		notFound("init with an extra segment", "POST", "/v1/agent/register/init/extra"),
	)

	// The leaderboard's limit.
	for _, l := range []struct{ name, q string }{
		{"0", "0"}, {"-1", "-1"}, {"1001", "1001"}, {"a word", "ten"}, {"1e3", "1e3"}, {"1.5", "1.5"},
		{"a leading space", "%205"}, {"a NUL byte", "5%00"}, {"SQL", "%27%20OR%201%3D1%20--"},
		{"20 digits", "99999999999999999999"}, {"hex", "0x10"}, {"script", "%3Cscript%3E"},
	} {
		cases = append(cases, hx("leaderboard limit "+l.name, "GET", "/v1/human/leaderboard?limit="+l.q).v1(400, "invalid_field", "limit"))
	}
	return cases
}

package oidc

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// benchCode is a code record as putCode writes it for a login with PKCE and a
// refresh token.
func benchCode() codeRecord {
	now := time.Date(2026, 3, 14, 15, 9, 26, 535897932, time.UTC)
	return codeRecord{
		ClientID: "bench-rs", RedirectURI: "https://bench.example/callback", Scopes: []string{"openid", "offline_access", "profile"},
		Nonce: "n-0123456789abcdef", CodeChallenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
		HumanID: "hA7xQ2mK9vL4pR8sT1wY6zB3cD5eF0gH2iJ4kL6mN8o", AuthTime: now.Add(-3 * time.Second), ExpiresAt: now.Add(time.Minute),
	}
}

// wantUnmarshalCode fails unless decodeCode(raw) is json.Unmarshal's value and
// error.
func wantUnmarshalCode(t *testing.T, raw []byte) {
	t.Helper()
	var want codeRecord
	wantErr := json.Unmarshal(raw, &want)
	got, err := decodeCode(raw)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
		t.Errorf("decodeCode(%q)\n = %#v, %v\nwant %#v, %v (json.Unmarshal's)", raw, got, err, want, wantErr)
	}
}

// codeJSON is the record as json.Marshal writes it.
func codeJSON(t testing.TB, rec codeRecord) string {
	t.Helper()
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDecodeCodeWritten: the records putCode and used write are read by hand
// (the fast path is taken), to json.Unmarshal's value.
func TestDecodeCodeWritten(t *testing.T) {
	full := benchCode()
	full.Resource = "https://api.example/"
	session := benchCode() // issued through an SSO session (singlelogout.go)
	session.PlannedGrant, session.Session = "0b7c3f4e-7d1a-4c55-9a43-3f1f2b9d8e21", "5e4fa8f4c7e5d067e7b21bdf7ee6f06724d2e547560185603b6812ab03737030"
	session.SessionEnd = session.AuthTime.Add(12 * time.Hour)
	local := benchCode()
	local.AuthTime, local.ExpiresAt = local.AuthTime.In(time.FixedZone("", 5*3600+1800)), time.Now()
	for name, rec := range map[string]codeRecord{
		"with PKCE":                  benchCode(),
		"with a resource":            full,
		"used":                       benchCode().used("6e195e7c-bf2d-4a64-a04a-5aaf7ca20e41"),
		"times with offsets":         local,
		"through a session":          session,
		"used, through a session":    session.used(session.PlannedGrant),
		"no scopes, nonce or PKCE":   {ClientID: "app", RedirectURI: "https://app.example/cb", HumanID: "h", ExpiresAt: time.Now()},
		"empty scopes (not omitted)": {ClientID: "app", Scopes: []string{}, HumanID: "h"},
		"zero":                       {},
	} {
		t.Run(name, func(t *testing.T) {
			raw := codeJSON(t, rec)
			if _, ok := scanCode([]byte(raw)); !ok {
				t.Errorf("scanCode(%s) left it to encoding/json", raw)
			}
			wantUnmarshalCode(t, []byte(raw))
		})
	}
}

// TestDecodeCodeAsUnmarshal: any other record decodes as json.Unmarshal decodes
// it: missing fields, unknown ones, other spellings, escapes, null, whitespace,
// duplicates, bad times, malformed JSON.
func TestDecodeCodeAsUnmarshal(t *testing.T) {
	raw := codeJSON(t, benchCode())
	body := strings.TrimSuffix(raw, "}")
	for _, s := range []string{
		raw,
		`{"clientId":"app","humanId":"h","expiresAt":"2026-03-14T15:10:26Z"}`, // missing optional fields
		`{"clientId":"app"}`, `{}`, `{"scopes":[]}`, `{"scopes":["a"]}`, `{"scopes":[""]}`, // missing required ones
		body + `,"extra":"x"}`, body + `,"extra":{"a":[1,null]}}`, `{"extra":1,` + raw[1:], // unknown keys
		body + `,"ClientID":"other"}`, `{"CLIENTID":"a","clientId":"b"}`, `{"clientId":"b","CLIENTID":"a"}`, // other spellings
		`{"clientId":"a","clientId":"b"}`, `{"scopes":["a"],"scopes":[]}`, `{"authTime":"2026-03-14T15:10:26Z","authTime":"2026-03-14T15:10:27+01:00"}`,
		`{"clientId":"a\"b"}`, `{"clientId":"a\\b"}`, `{"clientId":"\u0041\u2028"}`, `{"client\u0049d":"a"}`, `{"clientId":"<&>"}`,
		`{"clientId":"é"}`, "{\"clientId\":\"\xff\"}", "{\"clientId\":\"a\x01\"}", "{\"clientId\":\"\x7f\"}", `{"clientId":"日本"}`,
		`{"clientId":null}`, `{"scopes":null}`, `{"authTime":null}`, `{"scopes":["a",null]}`,
		` {"clientId":"a"}`, `{"clientId" : "a"}`, `{"clientId":"a"} `, "{\"clientId\":\"a\"}\n", `{"scopes":[ "a" ]}`,
		`{"authTime":"2026-03-14"}`, `{"authTime":"2026-03-14T15:10:26"}`, `{"expiresAt":"24:00"}`, `{"authTime":"2026-02-30T00:00:00Z"}`,
		`{"authTime":1}`, `{"clientId":1}`, `{"scopes":"openid"}`, `{"scopes":[1]}`, `{"grantId":true}`,
		``, `{`, `}`, `{"clientId":"a"`, `{"clientId":"a",}`, `{,"clientId":"a"}`, `{"clientId":"a"}{}`, `{"clientId"}`, `{"scopes":["a",]}`,
		`{"scopes":["a""b"]}`, `{"clientId":"a""humanId":"b"}`, `[]`, `null`, `"x"`, `{"clientId":"a`,
	} {
		wantUnmarshalCode(t, []byte(s))
	}
}

func FuzzDecodeCode(f *testing.F) {
	f.Add([]byte(codeJSON(f, benchCode())))
	f.Add([]byte(codeJSON(f, benchCode().used("g"))))
	f.Add([]byte(`{"clientId":"a","CLIENTID":"b","scopes":["x",null],"authTime":"2026-03-14T15:10:26+01:00","x":{}}`))
	f.Add([]byte(`{"clientId":"a\u0041","nonce":"é","expiresAt":null}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		wantUnmarshalCode(t, raw)
	})
}

// BenchmarkDecodeCode is the decoding of a code record in the exchange's
// transaction: by json.Unmarshal, as before, and by decodeCode.
func BenchmarkDecodeCode(b *testing.B) {
	raw := []byte(codeJSON(b, benchCode()))
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var rec codeRecord
			if err := json.Unmarshal(raw, &rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decodeCode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeCode(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}

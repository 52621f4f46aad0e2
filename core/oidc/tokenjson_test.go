package oidc

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// wantEncoderJSON fails unless r.AppendJSON writes what json.Encoder writes, on
// its own and after a prefix.
func wantEncoderJSON(t testing.TB, r *TokenResponse) {
	t.Helper()
	var want bytes.Buffer
	if err := json.NewEncoder(&want).Encode(r); err != nil {
		t.Fatalf("Encode(%+v): %v", r, err)
	}
	if got := r.AppendJSON(nil); !bytes.Equal(got, want.Bytes()) {
		t.Errorf("AppendJSON(%+v)\n got %q\nwant %q", r, got, want.Bytes())
	}
	prefix := []byte("prefix")
	if got := r.AppendJSON(prefix[:len(prefix):len(prefix)]); !bytes.Equal(got, append(prefix, want.Bytes()...)) {
		t.Errorf("AppendJSON(%+v) after a prefix = %q", r, got)
	}
}

// benchTokens is a code exchange's answer with tokens of the sizes palmgate signs
// (ES256; access, ID and refresh token of 640, 877 and 565 characters).
func benchTokens() *TokenResponse {
	jwt := func(n int) string {
		return strings.Repeat("eyJhbGciOiJFUzI1NiJ9.", n/21+1)[:n-44] + "." + strings.Repeat("Ab-_9z", 8)[:43]
	}
	return &TokenResponse{
		AccessToken: jwt(640), TokenType: "Bearer", ExpiresIn: 3600, Scope: "offline_access openid profile",
		IDToken: jwt(877), RefreshToken: jwt(565), RefreshTokenExpiresIn: 7776000,
	}
}

// specials are strings of every class encoding/json treats apart.
var specials = []string{
	"", "Bearer", "a.b-c_d~", " !#$%'()*+,-./:;=?@[]^_`{|}~", `q"uote`, `back\slash`, "<", ">", "&", "a<b>c&d",
	"\x00", "\x1f", "\t\n\r\b\f", "\x7f", "\u2028", "x\u2029y", "\xff", "\xc3", "a\xe2\x80", "é", "日本", "\U0001F600", "\ufffd",
}

func TestTokenResponseAppendJSON(t *testing.T) {
	h := newHarness(t)
	l := h.login(t, params("scope", "openid offline_access profile", "code_challenge", pkceChallengeB, "code_challenge_method", "S256"), "alice")
	wantEncoderJSON(t, h.exchange(t, l, pkceVerifierB))
	wantEncoderJSON(t, &TokenResponse{})
	wantEncoderJSON(t, &TokenResponse{AccessToken: "a", TokenType: "Bearer", ExpiresIn: 60, Scope: "api"})
	wantEncoderJSON(t, benchTokens())

	// Each special string at every offset of a longer one, which keys.Verbatim reads
	// eight bytes at a time.
	for _, s := range specials {
		for i := range 17 {
			long := strings.Repeat("abcdefgh", 3)
			r := benchTokens()
			r.Scope = long[:i] + s + long[i:]
			wantEncoderJSON(t, r)
		}
	}

	numbers := []int64{0, 1, -1, 3600, math.MaxInt64, math.MinInt64}
	for i, s := range specials {
		for f := range 5 {
			for j, n := range numbers {
				r := benchTokens()
				*[]*string{&r.AccessToken, &r.TokenType, &r.Scope, &r.IDToken, &r.RefreshToken}[f] = s
				r.ExpiresIn, r.RefreshTokenExpiresIn = n, numbers[(i+j)%len(numbers)]
				wantEncoderJSON(t, r)
				r.IDToken, r.RefreshToken = "", "" // a response without the optional tokens
				wantEncoderJSON(t, r)
			}
		}
	}
}

func FuzzTokenResponseAppendJSON(f *testing.F) {
	// Short seeds: the fuzzer minimizes each new input byte by byte.
	f.Add("eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.sig-_0", "Bearer", int64(3600), "offline_access openid", "e.y.J", "r.t.x", int64(7776000))
	f.Add("", "", int64(0), "", "", "", int64(0))
	for _, s := range specials {
		f.Add(s, "Bearer", int64(-1), "openid", s, "", int64(1))
	}
	f.Fuzz(func(t *testing.T, access, typ string, expires int64, scope, id, refresh string, refreshExpires int64) {
		wantEncoderJSON(t, &TokenResponse{
			AccessToken: access, TokenType: typ, ExpiresIn: expires, Scope: scope,
			IDToken: id, RefreshToken: refresh, RefreshTokenExpiresIn: refreshExpires,
		})
	})
}

// BenchmarkTokenResponseJSON is the encoding of a code exchange's answer: by
// json.Encoder, as handleToken wrote it before, and by AppendJSON into a new
// buffer, as handleToken writes it now, or into one reused.
func BenchmarkTokenResponseJSON(b *testing.B) {
	r := benchTokens()
	b.Run("encoder", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := json.NewEncoder(io.Discard).Encode(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = r.AppendJSON(nil)
		}
	})
	b.Run("append-reused", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf = r.AppendJSON(buf[:0])
		}
	})
}

// TestTokenResponseAppendJSONEveryField sets every field of TokenResponse: a
// field added to the type but not to AppendJSON's hand-written path would be
// left out of the answer, and fails here.
func TestTokenResponseAppendJSONEveryField(t *testing.T) {
	var r TokenResponse
	v := reflect.ValueOf(&r).Elem()
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.String:
			f.SetString("v" + strconv.Itoa(i))
		case reflect.Int64:
			f.SetInt(int64(i + 1))
		default:
			t.Fatalf("TokenResponse.%s is a %s: AppendJSON writes strings and int64s only", v.Type().Field(i).Name, f.Kind())
		}
	}
	wantEncoderJSON(t, &r)
}

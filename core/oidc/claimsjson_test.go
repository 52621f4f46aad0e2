package oidc

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/keys"
)

// wantClaimsJSON checks that c appends to a buffer exactly what json.Marshal
// writes for it, which is what keys.Set.Sign signed before claims encoded
// themselves.
func wantClaimsJSON(t testing.TB, c keys.ClaimsAppender) {
	t.Helper()
	want, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	prefix := []byte("prefix.")
	got, err := c.AppendClaims(bytes.Clone(prefix))
	if err != nil {
		t.Fatalf("%T: %v", c, err)
	}
	if !bytes.Equal(got, append(prefix, want...)) {
		t.Fatalf("%T:\n got %s\nwant %s%s", c, got, prefix, want)
	}
}

// tokenClaims are one token of each kind a code exchange signs, as sign fills
// them in.
func tokenClaims() (*AccessClaims, *IDClaims, *RefreshClaims) {
	now := jwt.NewNumericDate(time.Unix(1_790_000_000, 0))
	exp := jwt.NewNumericDate(now.Add(time.Hour))
	sub, grant := strings.Repeat("S", 43), "0b8f6f4e-6d7c-4c55-9a59-2f1f7c4a3e21"
	access := &AccessClaims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: "https://id.example/oauth2", Subject: sub,
			Audience: jwt.ClaimStrings{"https://id.example"}, IssuedAt: now, ExpiresAt: exp, ID: "jti-1"},
		ClientID: "app", Scope: "openid offline_access", AuthTime: now.Unix() - 5, GrantID: grant,
	}
	id := &IDClaims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: "https://id.example/oauth2", Subject: sub,
			Audience: jwt.ClaimStrings{"app"}, IssuedAt: now, ExpiresAt: exp},
		AuthTime: now.Unix() - 5, Nonce: "n-0123456789abcdef", ACR: ACRPalm, AMR: []string{AMRPalm},
		AZP: "app", GrantID: grant, PreferredUsername: "palm-7f3a",
	}
	refresh := &RefreshClaims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: "https://id.example/oauth2", Subject: sub,
			Audience: jwt.ClaimStrings{"https://id.example/oauth2"}, IssuedAt: now,
			ExpiresAt: jwt.NewNumericDate(now.Add(90 * 24 * time.Hour)), ID: "rt-1"},
		ClientID: "app", GrantID: grant,
	}
	return access, id, refresh
}

func TestClaimsAppendJSON(t *testing.T) {
	access, id, refresh := tokenClaims()
	for _, c := range []keys.ClaimsAppender{access, id, refresh, &AccessClaims{}, &IDClaims{}, &RefreshClaims{}} {
		wantClaimsJSON(t, c)
	}
	// An agent's token (the jwt-bearer grant), with and without a profile.
	access.Act = &bearer.Actor{Subject: "dev-1", Profile: bearer.ActorProfileAgent}
	wantClaimsJSON(t, access)
	access.Act = &bearer.Actor{Subject: "dev-1"}
	wantClaimsJSON(t, access)

	// Each special string in every string of each kind of token, at every offset
	// of a longer one (keys.Verbatim reads eight bytes at a time).
	long := strings.Repeat("abcdefgh", 3)
	for _, s := range specials {
		for i := range 17 {
			v := long[:i] + s + long[i:]
			for f := range 16 {
				access, id, refresh := tokenClaims()
				access.Act = &bearer.Actor{Subject: "dev", Profile: "p"}
				*[]*string{&access.Issuer, &access.Subject, &access.ID, &access.ClientID, &access.Scope, &access.GrantID,
					&access.Act.Subject, &access.Act.Profile, &id.Nonce, &id.ACR, &id.AZP, &id.GrantID, &id.PreferredUsername,
					&id.AMR[0], &refresh.ClientID, &refresh.Audience[0]}[f] = v
				for _, c := range []keys.ClaimsAppender{access, id, refresh} {
					wantClaimsJSON(t, c)
				}
			}
		}
	}

	// Dates and numbers at their edges, and dates left out one by one.
	for _, n := range []int64{0, 1, -1, math.MaxInt32, -62135596800, 253402300799} {
		access, id, _ := tokenClaims()
		d := jwt.NewNumericDate(time.Unix(n, 0))
		access.ExpiresAt, access.IssuedAt, access.NotBefore, access.AuthTime = d, nil, d, n
		id.ExpiresAt, id.IssuedAt, id.AuthTime = nil, d, n
		wantClaimsJSON(t, access)
		wantClaimsJSON(t, id)
	}

	// Audiences of none, one and two; methods of none (nil and empty).
	for _, aud := range []jwt.ClaimStrings{nil, {}, {"a"}, {"a", "b"}, {"a", "<b>"}} {
		access, id, _ := tokenClaims()
		access.Audience, id.Audience = aud, aud
		id.AMR = nil
		wantClaimsJSON(t, access)
		wantClaimsJSON(t, id)
		id.AMR = []string{}
		wantClaimsJSON(t, id)
	}
}

// TestClaimsAppendJSONJWTOptions sets golang-jwt's two encoding options away from
// their defaults: a single audience as a string, and dates with fractions.
func TestClaimsAppendJSONJWTOptions(t *testing.T) {
	single, precision := jwt.MarshalSingleStringAsArray, jwt.TimePrecision
	t.Cleanup(func() { jwt.MarshalSingleStringAsArray, jwt.TimePrecision = single, precision })
	jwt.MarshalSingleStringAsArray = false
	access, id, refresh := tokenClaims()
	for _, c := range []keys.ClaimsAppender{access, id, refresh} {
		wantClaimsJSON(t, c)
	}
	jwt.TimePrecision = time.Millisecond
	access.IssuedAt = jwt.NewNumericDate(time.Unix(1_790_000_000, 123_456_789))
	for _, c := range []keys.ClaimsAppender{access, id, refresh} {
		wantClaimsJSON(t, c)
	}
}

// TestClaimsAppendJSONEveryField sets every field of each claims type, those of
// jwt.RegisteredClaims and bearer.Actor included: a field added to a type but
// not to its AppendClaims would be left out of the token, and fails here.
func TestClaimsAppendJSONEveryField(t *testing.T) {
	for _, c := range []keys.ClaimsAppender{&AccessClaims{}, &IDClaims{}, &RefreshClaims{}} {
		n := 0
		fillEveryField(t, reflect.ValueOf(c).Elem(), &n)
		wantClaimsJSON(t, c)
	}
}

// fillEveryField gives each field of struct v a value of its own, not its zero.
func fillEveryField(t *testing.T, v reflect.Value, n *int) {
	t.Helper()
	for i := range v.NumField() {
		f := v.Field(i)
		*n++
		switch {
		case f.Kind() == reflect.Struct:
			fillEveryField(t, f, n)
		case f.Kind() == reflect.String:
			f.SetString("v" + string(rune('a'+*n%26)))
		case f.Kind() == reflect.Int64:
			f.SetInt(int64(*n))
		case f.Type() == reflect.TypeFor[*jwt.NumericDate]():
			f.Set(reflect.ValueOf(jwt.NewNumericDate(time.Unix(int64(1000+*n), 0))))
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
			f.Set(reflect.MakeSlice(f.Type(), 2, 2))
			f.Index(0).SetString("x")
			f.Index(1).SetString("y")
		case f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.Struct:
			f.Set(reflect.New(f.Type().Elem()))
			fillEveryField(t, f.Elem(), n)
		default:
			t.Fatalf("%s.%s is a %s: extend AppendClaims and this test", v.Type(), v.Type().Field(i).Name, f.Type())
		}
	}
}

func FuzzClaimsAppendJSON(f *testing.F) {
	f.Add("https://id.example/oauth2", "SSSS", "app", "", "jti", int64(1_790_000_000), int64(0), "openid", "n", true)
	f.Add("", "", "", "", "", int64(0), int64(-1), "", "", false)
	for _, s := range specials {
		f.Add(s, "sub", s, "b", "", int64(1), int64(2), s, s, true)
	}
	f.Fuzz(func(t *testing.T, iss, sub, aud0, aud1, jti string, exp, authTime int64, scope, nonce string, act bool) {
		aud := jwt.ClaimStrings{aud0}
		if aud1 != "" {
			aud = append(aud, aud1)
		}
		var date *jwt.NumericDate
		if exp != 0 {
			date = jwt.NewNumericDate(time.Unix(exp%(1<<40), 0))
		}
		rc := jwt.RegisteredClaims{Issuer: iss, Subject: sub, Audience: aud, ExpiresAt: date, IssuedAt: date, ID: jti}
		access := &AccessClaims{RegisteredClaims: rc, ClientID: aud0, Scope: scope, AuthTime: authTime, GrantID: jti}
		if act {
			access.Act = &bearer.Actor{Subject: nonce, Profile: aud1}
		}
		wantClaimsJSON(t, access)
		wantClaimsJSON(t, &IDClaims{RegisteredClaims: rc, AuthTime: authTime, Nonce: nonce, ACR: scope,
			AMR: []string{aud0, nonce}, AZP: aud1, GrantID: jti, PreferredUsername: sub})
		wantClaimsJSON(t, &RefreshClaims{RegisteredClaims: rc, ClientID: scope, GrantID: nonce})
	})
}

// BenchmarkClaimsJSON is the encoding of the three tokens of a code exchange:
// by json.Marshal, as keys.Set.Sign did before, and by AppendClaims.
func BenchmarkClaimsJSON(b *testing.B) {
	access, id, refresh := tokenClaims()
	claims := []keys.ClaimsAppender{access, id, refresh}
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, c := range claims {
				if _, err := json.Marshal(c); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, c := range claims {
				if _, err := c.AppendClaims(nil); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

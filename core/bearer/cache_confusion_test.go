package bearer

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/internal/jwttest"
)

// forgeries are strings made from token (cached) and other (a valid token of the
// same issuer): none is token, and none may be answered from token's cache entry.
func forgeries(t *testing.T, token, other string) map[string]string {
	t.Helper()
	dot, otherDot := strings.LastIndexByte(token, '.'), strings.LastIndexByte(other, '.')
	first := strings.IndexByte(token, '.')
	sig := token[dot+1:]
	return map[string]string{
		"a trailing dot":                       token + ".",
		"an extra segment":                     token + ".x",
		"an empty fourth segment before sig":   token[:dot] + ".." + sig,
		"a leading dot":                        "." + token,
		"a trailing space":                     token + " ",
		"a leading space":                      " " + token,
		"no dots":                              strings.ReplaceAll(token, ".", ""),
		"the signature alone":                  sig,
		"the signature after one dot":          "." + sig,
		"empty header and payload":             ".." + sig,
		"another header (alg none)":            base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"at+jwt"}`)) + token[first:],
		"another header (its JSON respaced)":   respacedHeader(t, token) + token[first:],
		"another payload":                      token[:first] + other[strings.IndexByte(other, '.'):otherDot] + token[dot:],
		"another token's header and payload":   other[:otherDot] + token[dot:],
		"its header and payload, no sig":       token[:dot],
		"its header and payload, empty sig":    token[:dot+1],
		"another token's signature":            token[:dot] + other[otherDot:],
		"high s with another payload":          token[:first] + other[strings.IndexByte(other, '.'):otherDot] + jwttest.Malleate(t, token)[dot:],
		"high s with another token's header":   other[:otherDot] + jwttest.Malleate(t, token)[dot:],
		"the signature with stray base64 bits": jwttest.StrayBits(token),
	}
}

// TestCacheHitOnlyForTheStringVerified (2026-11-27): the cache is keyed by the
// hash of the signature segment and compares the header and payload; no string
// but the one verified (or, for a remote issuer, its high-s twin) may hit it,
// whatever is done to the dots, the segments or the signature.
func TestCacheHitOnlyForTheStringVerified(t *testing.T) {
	ctx := context.Background()
	for _, remote := range []bool{false, true} {
		t.Run(fmt.Sprintf("remote=%v", remote), func(t *testing.T) {
			f, v := confusionVerifier(t, remote)
			token, other := f.token(t, "cached"), f.token(t, "other")
			if _, err := v.Verify(ctx, token); err != nil {
				t.Fatal(err)
			}
			now := f.clock.Now()
			for name, forged := range forgeries(t, token, other) {
				if forged == token {
					t.Fatalf("%s: not a forgery", name)
				}
				if claims, ok := v.cache.get(v.cacheKey(forged), now); ok {
					t.Errorf("%s: a cache hit (claims of %q)", name, claims.ID)
				}
				if claims, err := v.Verify(ctx, forged); err == nil && claims.ID != "other" {
					t.Errorf("%s: admitted with the claims of %q", name, claims.ID)
				}
			}
			if n := len(v.cache.entries); n != 1 {
				t.Errorf("%d cache entries after the forgeries, want 1 (the token's)", n)
			}
			claims, ok := v.cache.get(v.cacheKey(token), now)
			if !ok || claims.ID != "cached" {
				t.Fatalf("the token itself: hit %v, claims %+v", ok, claims)
			}
			twinHit := false
			if _, ok := v.cache.get(v.cacheKey(jwttest.Malleate(t, token)), now); ok {
				twinHit = true
			}
			if twinHit != remote {
				t.Errorf("the high-s twin hit the cache: %v, want %v", twinHit, remote)
			}
		})
	}
}

// TestCacheEntryHoldsNoTokenMemory (2026-11-27): no byte of a cache entry's
// header and payload lies in the verified string's memory (a slice of it would
// keep the signature reachable), for a token verified, a remote issuer's high-s
// twin (cached under a key built for it) and a token remembered at issuance.
func TestCacheEntryHoldsNoTokenMemory(t *testing.T) {
	ctx := context.Background()
	inside := func(s, of string) bool {
		if len(s) == 0 || len(of) == 0 {
			return false
		}
		p, lo := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(of)))
		return p+uintptr(len(s)) > lo && p < lo+uintptr(len(of))
	}
	for _, remote := range []bool{false, true} {
		f, v := confusionVerifier(t, remote)
		verified, remembered := f.token(t, "verified"), f.token(t, "remembered")
		if remote {
			verified = jwttest.Malleate(t, verified)
		}
		if _, err := v.Verify(ctx, verified); err != nil {
			t.Fatal(err)
		}
		v.Remember(remembered, rememberedClaims(f, "remembered"))
		for _, token := range []string{verified, remembered} {
			key := v.cacheKey(token)
			_, hash := splitToken(key)
			e, ok := v.cache.entries[hash]
			if !ok {
				t.Fatalf("remote=%v: no entry for %.20q", remote, token)
			}
			if inside(e.signed, token) || inside(e.signed, key) {
				t.Errorf("remote=%v: the entry's header and payload share the token's memory", remote)
			}
		}
	}
}

// TestCacheConcurrentVerify (2026-11-27): a small cache under concurrent
// Verify, Remember and forged strings (run with -race): every admitted string is
// a token as issued, answered with its own claims; every forgery is refused.
func TestCacheConcurrentVerify(t *testing.T) {
	ctx := context.Background()
	f := newTokenFixture(t, "https://id.example.test/oauth2")
	v := NewVerifier(Config{Issuer: f.issuer, Algorithm: keys.ES256, Keys: f.set, Now: f.clock.Now, CacheSize: 8})
	const n = 24
	tokens := make([]string, n)
	for i := range tokens {
		tokens[i] = f.token(t, fmt.Sprintf("jti-%02d", i))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4*n)
	for g := range 4 {
		wg.Go(func() {
			for i := range n {
				k := (i + g*5) % n
				token := tokens[k]
				if g == 3 {
					v.Remember(token, rememberedClaims(f, fmt.Sprintf("jti-%02d", k)))
					continue
				}
				claims, err := v.Verify(ctx, token)
				if err != nil {
					errs <- fmt.Errorf("token %d refused: %v", k, err)
					continue
				}
				if claims.ID != fmt.Sprintf("jti-%02d", k) {
					errs <- fmt.Errorf("token %d answered with the claims of %s", k, claims.ID)
				}
				other := tokens[(k+1)%n]
				forged := other[:strings.LastIndexByte(other, '.')] + token[strings.LastIndexByte(token, '.'):]
				if _, err := v.Verify(ctx, forged); !errors.Is(err, ErrInvalidToken) {
					errs <- fmt.Errorf("token %d's signature on token %d's payload: %v", k, (k+1)%n, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(v.cache.entries) > 8 {
		t.Errorf("%d entries, over the bound of 8", len(v.cache.entries))
	}
}

// confusionVerifier is a verifier of palmgate's own tokens, or of a remote
// issuer's (served by an httptest server), which accepts high-s twins.
func confusionVerifier(t *testing.T, remote bool) (*tokenFixture, *Verifier) {
	t.Helper()
	if !remote {
		f := newTokenFixture(t, "https://id.example.test/oauth2")
		return f, NewVerifier(Config{Issuer: f.issuer, Algorithm: keys.ES256, Keys: f.set, Now: f.clock.Now})
	}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f := newTokenFixture(t, srv.URL+"/oauth2")
	mux.HandleFunc("/oauth2/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": f.issuer, "jwks_uri": srv.URL + "/oauth2/jwks"})
	})
	mux.HandleFunc("/oauth2/jwks", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": f.set.JWKS()})
	})
	issuerKeys := NewRemoteKeys(f.issuer, srv.Client(), time.Second, nil)
	return f, NewVerifier(Config{Issuer: f.issuer, Algorithm: keys.ES256, Keys: issuerKeys, Now: f.clock.Now})
}

// rememberedClaims are the claims f.token signs for jti, as the issuer remembers them.
func rememberedClaims(f *tokenFixture, jti string) *Claims {
	return &Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: f.issuer, Subject: "pairwise-sub", ID: jti,
			IssuedAt: jwt.NewNumericDate(f.clock.Now()), ExpiresAt: jwt.NewNumericDate(f.clock.Now().Add(time.Hour)),
		},
		ClientID: "app", Scope: "openid", GrantID: "grant-" + jti,
	}
}

// respacedHeader is token's header with a space after its opening brace: the
// same JSON, another string.
func respacedHeader(t *testing.T, token string) string {
	t.Helper()
	h, err := base64.RawURLEncoding.DecodeString(token[:strings.IndexByte(token, '.')])
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(append([]byte("{ "), h[1:]...))
}

package keys

import (
	"context"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// TestSignAsGolangJWT: Sign's header and claims segments are byte for byte
// golang-jwt's Token.SigningString for the same key, typ and claims, for every
// algorithm and typ in turn (so a header remembered for one typ or key is never
// another's), the second time as the first (remembered), and after a rotation
// (the new kid).
func TestSignAsGolangJWT(t *testing.T) {
	s := openSet(t, openStore(t, t.TempDir()))
	claims := testClaims()
	claims.Subject = `a "quoted" <sub> & more` // json.Marshal's escaping, in the claims
	check := func(t *testing.T, alg, typ string) {
		t.Helper()
		k := s.Active(alg)
		want := jwt.NewWithClaims(k.Method(), claims)
		want.Header["kid"] = k.ID
		want.Header["typ"] = typ
		wantSigning, err := want.SigningString()
		if err != nil {
			t.Fatal(err)
		}
		for pass := range 2 {
			token, err := s.Sign(alg, typ, claims)
			if err != nil {
				t.Fatal(err)
			}
			if got := token[:strings.LastIndexByte(token, '.')]; got != wantSigning {
				t.Errorf("%s %s, pass %d: signing string\n%s\nwant (golang-jwt)\n%s", alg, typ, pass, got, wantSigning)
			}
			parse(t, token, alg, k.Public())
		}
	}
	for _, alg := range Algorithms {
		for _, typ := range []string{"at+jwt", "rt+jwt", "JWT", `odd "typ" <&>`} {
			check(t, alg, typ)
		}
	}
	for _, alg := range Algorithms {
		if _, err := s.Rotate(context.Background(), alg); err != nil {
			t.Fatal(err)
		}
		check(t, alg, "at+jwt")
	}
}

// TestHeaderSegmentsBounded: the headers remembered never exceed
// headerSegmentsMax, and the newest one is always among them (a key made after
// many rotations is not left out).
func TestHeaderSegmentsBounded(t *testing.T) {
	var h headerSegments
	for i := range 3 * headerSegmentsMax {
		typ := strings.Repeat("t", i+1)
		seg, err := h.segment(ES256, "kid", typ)
		if err != nil || seg == "" {
			t.Fatalf("segment %d: %q, %v", i, seg, err)
		}
		if len(h.m) > headerSegmentsMax {
			t.Fatalf("%d headers remembered, more than %d", len(h.m), headerSegmentsMax)
		}
		if _, ok := h.m[headerID{ES256, "kid", typ}]; !ok {
			t.Fatalf("header %d not remembered", i)
		}
	}
}

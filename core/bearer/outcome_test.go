package bearer

import (
	"context"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/keys"
)

// revokedAll says every grant is revoked.
type revokedAll struct{}

func (revokedAll) Revoked(context.Context, string) (bool, error) { return true, nil }

// TestDecision: each refusal of Check is counted under its own outcome: a
// missing token, an invalid one (forged, or for another audience), one expired
// (within the parser's leeway or past it), one revoked, one lacking a scope, an
// issuer that cannot tell; a good token is allowed.
func TestDecision(t *testing.T) {
	ctx := context.Background()
	f := newTokenFixture(t, "https://id.example.test/oauth2")
	v := NewVerifier(Config{Issuer: f.issuer, Algorithm: keys.ES256, Keys: f.set, Now: f.clock.Now, CacheSize: -1})
	revoked := NewVerifier(Config{Issuer: f.issuer, Algorithm: keys.ES256, Keys: f.set, Now: f.clock.Now, Revocations: revokedAll{}, CacheSize: -1})
	down := NewVerifier(Config{Issuer: f.issuer, Algorithm: keys.ES256, Keys: f.set, Now: f.clock.Now, Revocations: downRevocations{}, CacheSize: -1})
	sign := func(ttl time.Duration) string {
		t.Helper()
		token, err := f.set.Sign(keys.ES256, TokenType, Claims{
			RegisteredClaims: jwt.RegisteredClaims{Issuer: f.issuer, Subject: "sub", Audience: jwt.ClaimStrings{"https://api.example.test"},
				IssuedAt: jwt.NewNumericDate(f.clock.Now()), ExpiresAt: jwt.NewNumericDate(f.clock.Now().Add(ttl))},
			Scope: "openid", GrantID: "grant-1",
		})
		if err != nil {
			t.Fatal(err)
		}
		return token
	}
	good, short, shortest := sign(time.Hour), sign(10*time.Second), sign(time.Second)
	f.clock.Advance(5 * time.Second) // both expired tokens issued before: iat is not ahead
	for _, tc := range []struct {
		name     string
		v        *Verifier
		advance  time.Duration
		token    string
		audience string
		scopes   []string
		want     event.Outcome
	}{
		{"allowed", v, 0, good, "", []string{"openid"}, event.Allowed},
		{"missing", v, 0, "", "", nil, event.Missing},
		{"forged", v, 0, good + "x", "", nil, event.Invalid},
		{"other audience", v, 0, good, "https://other.example.test", nil, event.Invalid},
		{"insufficient scope", v, 0, good, "", []string{"admin"}, event.InsufficientScope},
		{"revoked", revoked, 0, good, "", nil, event.Revoked},
		{"unavailable", down, 0, good, "", nil, event.Unavailable},
		{"expired, within the parser's leeway", v, 10 * time.Second, short, "", nil, event.Expired},
		{"expired, past the parser's leeway", v, 2 * Leeway, shortest, "", nil, event.Expired},
	} {
		f.clock.Advance(tc.advance)
		_, err := tc.v.Check(ctx, tc.token, tc.audience, tc.scopes)
		if got := Decision(err); got != tc.want {
			t.Errorf("%s: Decision(%v) = %s, want %s", tc.name, err, got, tc.want)
		}
	}
}

// BenchmarkDecisionAllowed: counting an admitted request's decision costs nothing.
func BenchmarkDecisionAllowed(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if Decision(nil) != event.Allowed {
			b.Fatal("not allowed")
		}
	}
}

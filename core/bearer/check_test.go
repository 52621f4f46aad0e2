package bearer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/storage"
)

// downRevocations cannot tell: the store is unavailable.
type downRevocations struct{}

func (downRevocations) Revoked(context.Context, string) (bool, error) {
	return false, storage.ErrUnavailable
}

// TestCheckDecisions: Check makes RFC 6750's decisions in order (a token, every
// check of the verifier, the audience, the scopes) and refuses each with its
// fault: Unauthorized (ErrNoToken or invalid_token, the audience refusal with its
// own description), Forbidden insufficient_scope naming the scopes, Unavailable
// with a Retry-After when revocations cannot be checked.
func TestCheckDecisions(t *testing.T) {
	ctx := context.Background()
	f := newTokenFixture(t, "https://id.example.test/oauth2")
	v := NewVerifier(Config{Issuer: f.issuer, Algorithm: keys.ES256, Keys: f.set, Now: f.clock.Now})
	token, err := f.set.Sign(keys.ES256, TokenType, Claims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: f.issuer, Subject: "sub", Audience: jwt.ClaimStrings{"https://api.example.test"},
			IssuedAt: jwt.NewNumericDate(f.clock.Now()), ExpiresAt: jwt.NewNumericDate(f.clock.Now().Add(time.Hour))},
		Scope: "openid orders:read", GrantID: "grant-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := v.Check(ctx, token, "https://api.example.test", []string{"orders:read", "openid"}); err != nil || c.Subject != "sub" {
		t.Fatalf("Check of a good token = %v, %v", c, err)
	}
	down := NewVerifier(Config{Issuer: f.issuer, Algorithm: keys.ES256, Keys: f.set, Now: f.clock.Now, Revocations: downRevocations{}, CacheSize: -1})
	for _, tc := range []struct {
		name             string
		v                *Verifier
		token, audience  string
		scopes           []string
		class            fault.Class
		code, msg, scope string
		retry            time.Duration
	}{
		{"no token", v, "", "", nil, fault.Unauthorized, CodeInvalidRequest, "a bearer access token is required", "", 0},
		{"invalid token", v, token + "x", "", nil, fault.Unauthorized, CodeInvalidToken, "the access token is invalid, expired or revoked", "", 0},
		{"other audience", v, token, "https://other.example.test", nil, fault.Unauthorized, CodeInvalidToken, "the access token was issued for another audience", "", 0},
		{"other audience before scopes", v, token, "https://other.example.test", []string{"admin"}, fault.Unauthorized, CodeInvalidToken, "the access token was issued for another audience", "", 0},
		{"missing scope", v, token, "", []string{"openid", "orders:write", "admin"}, fault.Forbidden, CodeInsufficientScope, "the token lacks scope openid orders:write admin", "openid orders:write admin", 0},
		{"revocations unavailable", down, token, "", nil, fault.Unavailable, CodeTemporarilyUnavailable, "the token issuer cannot be reached", "", fault.StorageRetryAfter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.v.Check(ctx, tc.token, tc.audience, tc.scopes)
			var fe *fault.Error
			if c != nil || !errors.As(err, &fe) {
				t.Fatalf("Check = %v, %v; want a fault", c, err)
			}
			if fe.Class != tc.class || fe.Code != tc.code || fe.Message != tc.msg || fe.RetryAfter != tc.retry {
				t.Errorf("fault %d %s %q (retry %s), want %d %s %q (retry %s)", fe.Class, fe.Code, fe.Message, fe.RetryAfter, tc.class, tc.code, tc.msg, tc.retry)
			}
			if got, _ := fe.Details["scope"].(string); got != tc.scope {
				t.Errorf("details.scope %q, want %q", got, tc.scope)
			}
			if (tc.name == "no token") != errors.Is(err, ErrNoToken) {
				t.Errorf("errors.Is(err, ErrNoToken) = %v", errors.Is(err, ErrNoToken))
			}
			if tc.class == fault.Unavailable && !errors.Is(err, storage.ErrUnavailable) {
				t.Errorf("the unavailable refusal %v does not carry its cause", err)
			}
		})
	}
}

package caddymodule

import (
	"context"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/internal/keystest"
	"github.com/palmgate/palmgate/storage/memstore"
)

// testIssuer is the issuer of newTestBearer's tokens.
const testIssuer = "https://id.example.test/oauth2"

// newTestBearer is a palmgate_bearer requiring scopes, with its own key set, and
// an access token of that set for scope openid (sub pairwise-sub, client app)
// valid for an hour.
func newTestBearer(tb testing.TB, scopes ...string) (*Bearer, string) {
	tb.Helper()
	set, err := keys.Open(context.Background(), memstore.New(), time.Now, keys.WithGenerator(keystest.Generator))
	if err != nil {
		tb.Fatal(err)
	}
	token, err := set.Sign(keys.ES256, bearer.TokenType, bearer.Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: testIssuer, Subject: "pairwise-sub", ID: "jti-1",
			IssuedAt: jwt.NewNumericDate(time.Now()), ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour)),
		},
		ClientID: "app", Scope: "openid", GrantID: "grant-1",
	})
	if err != nil {
		tb.Fatal(err)
	}
	initMetrics()
	return &Bearer{Scopes: scopes, Realm: "palmgate", logger: zap.NewNop(),
		verifier: bearer.NewVerifier(bearer.Config{Issuer: testIssuer, Algorithm: keys.ES256, Keys: set})}, token
}

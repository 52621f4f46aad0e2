package caddymodule

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/internal/keystest"
	"github.com/palmgate/palmgate/storage"
)

// adminIssuer is the issuer of the admin tests' services.
const adminIssuer = "http://127.0.0.1:8080"

// newTestOIDC builds the palm and OIDC services of the admin tests on store
// (dev mode, fixed test keys); with, if given, changes the OIDC config first.
func newTestOIDC(t *testing.T, store storage.Store, with ...func(*oidc.Config)) (*oidc.Service, *palm.Service) {
	t.Helper()
	ctx := context.Background()
	ps, err := palm.NewService(palm.Config{Store: store, Issuer: adminIssuer, Dev: true})
	if err != nil {
		t.Fatal(err)
	}
	ks, err := keys.Open(ctx, store, nil, keys.WithGenerator(keystest.Generator))
	if err != nil {
		t.Fatal(err)
	}
	cfg := oidc.Config{Store: store, Palm: ps, Keys: ks, Issuer: adminIssuer,
		PairwiseSecret: strings.Repeat("p", 32), AccessTTL: time.Hour, RefreshTTL: time.Hour, CodeTTL: time.Minute}
	for _, f := range with {
		f(&cfg)
	}
	svc, err := oidc.NewService(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return svc, ps
}

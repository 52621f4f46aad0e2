package oidc

import (
	"context"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/internal/keystest"
	"github.com/palmgate/palmgate/storage/memstore"
)

// TestNewServiceRefusesInvalidClients: NewService refuses what the Caddyfile
// refuses (CheckClients), so that no caller can build a provider with a client
// that could never work.
func TestNewServiceRefusesInvalidClients(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		client Client
		want   string
	}{
		{"no id", Client{Secret: "s"}, "client_id"},
		{"no secret", Client{ID: "c"}, "secret"},
		{"both secrets", Client{ID: "c", Secret: "s", SecretHash: "sha256:" + strings.Repeat("0", 64)}, "exclusive"},
		{"relative redirect", Client{ID: "c", Secret: "s", RedirectURIs: []string{"/cb"}}, "redirect_uri"},
		{"redirect with fragment", Client{ID: "c", Secret: "s", RedirectURIs: []string{"https://a.example/cb#x"}}, "redirect_uri"},
		{"scopes without openid", Client{ID: "c", Secret: "s", Scopes: []string{"orders:read"}}, "openid"},
		{"relative resource", Client{ID: "c", Secret: "s", Resources: []string{"/api"}}, "resources"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewService(ctx, bareConfig(t, tc.client))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewService = %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

// bareConfig is a Config on a fresh memstore with palm and fixed test keys, and
// clients as its static clients: for tests of NewService's own checks.
func bareConfig(t *testing.T, clients ...Client) Config {
	t.Helper()
	store := memstore.New()
	ps, err := palm.NewService(palm.Config{Store: store, Issuer: testIssuer, Dev: true})
	if err != nil {
		t.Fatal(err)
	}
	ks, err := keys.Open(context.Background(), store, nil, keys.WithGenerator(keystest.Generator))
	if err != nil {
		t.Fatal(err)
	}
	return Config{Store: store, Palm: ps, Keys: ks, Issuer: testIssuer, Clients: clients, PairwiseSecret: testSecret}
}

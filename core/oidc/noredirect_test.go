package oidc

import (
	"context"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/core/fault"
)

// TestAuthorizeClientWithoutRedirectURI: a static client configured without a
// redirect_uri (a resource server that only introspects and revokes) is
// refused a login in words that say why and what to add, not "redirect_uri is
// not registered" as if the request had a typo (fourth review).
func TestAuthorizeClientWithoutRedirectURI(t *testing.T) {
	ctx := context.Background()
	svc, err := NewService(ctx, bareConfig(t, Client{ID: "reports", Secret: "reports-secret"}))
	if err != nil {
		t.Fatal(err)
	}
	p := params("client_id", "reports")
	_, err = svc.Authorize(ctx, p, testBrowser)
	f, ok := fault.As(err)
	if !ok || f.Code != ErrInvalidRequest || !strings.Contains(f.Message, "client reports has no redirect_uri") {
		t.Fatalf("Authorize for a client without redirect URIs = %v, want invalid_request saying it has no redirect_uri", err)
	}
}

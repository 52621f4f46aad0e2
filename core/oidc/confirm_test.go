package oidc

import (
	"context"
	"errors"
	"testing"
)

// TestAnonymousClientErrorsConfirmed (fourth review; RFC 9700 4.11.2): an error
// of an authorization request goes back to the redirect_uri before anyone signs
// in. For a client registered by anyone (RFC 7591) or described by a document at
// any URL, that redirect_uri is the registrant's choice, so the issuer's origin
// would be an open redirector: such errors are marked Confirm (the edge shows
// them to the person, who may follow the link). The operator's and the portal's
// clients are redirected as before.
func TestAnonymousClientErrorsConfirmed(t *testing.T) {
	h := newHarness(t)
	h.openRegistration(RegistrationConfig{})
	reg := h.register(t, RegistrationRequest{RedirectURIs: []string{regLoopback}, TokenEndpointAuthMethod: "none"}, regAddress)
	const doc = "https://a.example.test/doc.json"
	h.svc.clients.metadata = &fakeDocs{docs: map[string]string{doc: `{"client_id":"` + doc + `","redirect_uris":["` + regLoopback + `"]}`}}
	portal, _ := h.createClient(t, "dev", appRedirect)
	for _, tc := range []struct {
		name, id, redirect string
		confirm            bool
	}{
		{"registered (RFC 7591)", reg.ClientID, regLoopback, true},
		{"metadata document", doc, regLoopback, true},
		{"portal", portal.ID, appRedirect, false},
		{"operator", "app", appRedirect, false},
	} {
		for _, bad := range [][2]string{{"response_type", "token"}, {"prompt", "none"}, {"scope", "openid nope"}} {
			p := regParams(tc.id, tc.redirect)
			p.Set(bad[0], bad[1])
			_, err := h.svc.Authorize(context.Background(), p, testBrowser)
			var back *RedirectError
			if !errors.As(err, &back) {
				t.Fatalf("%s, %s=%s: %v; want an error back to the client", tc.name, bad[0], bad[1], err)
			}
			if back.Confirm != tc.confirm {
				t.Errorf("%s, %s=%s: Confirm = %v; want %v", tc.name, bad[0], bad[1], back.Confirm, tc.confirm)
			}
		}
	}
}

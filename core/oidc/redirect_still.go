package oidc

import (
	"context"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/storage"
)

// A login or a consent is answered minutes after its authorization request was
// checked (the palm scan, the consent page): its redirect_uri, registered then,
// may have been removed from its client since (a dynamic client edited in the
// portal, the admin API or the CLI, or deleted), typically because it is no longer
// the developer's. The answer, a code or an error, then goes nowhere: the browser
// gets the error page (RFC 6749 4.1.2.1: an invalid redirection URI is not
// redirected to), and a code issued before the removal is refused at the token
// endpoint (redeemCode checks the client's redirect URIs as they are now).

// checkRedirectStill refuses to answer authorization request id when its client is
// gone (ErrUnknownClient) or no longer has its redirect_uri
// (ErrRedirectURINotRegistered), for the browser presenting binding. A request that
// browser may not answer anyway (unknown, of another browser, answered) is left to
// the caller, which refuses it with its own error. A removal that commits between
// this check and the answer's transaction is caught at the token endpoint.
func (s *Service) checkRedirectStill(ctx context.Context, id, binding string) error {
	var ar *AuthRequest
	err := s.store.View(ctx, func(txn storage.Txn) error {
		var err error
		ar, err = getAuthRequest(txn, id)
		return err
	})
	if err != nil || !ar.boundTo(binding) || ar.Status == RequestAnswered {
		return nil
	}
	cl, err := s.clients.lookup(ctx, ar.ClientID)
	switch {
	case err != nil:
		return err
	case cl == nil:
		return fault.Of(ErrUnknownClient, "the application of this sign-in is no longer registered")
	case !cl.allowsRedirect(ar.RedirectURI):
		return fault.Of(ErrRedirectURINotRegistered, "redirect_uri is no longer registered for this client")
	}
	return nil
}

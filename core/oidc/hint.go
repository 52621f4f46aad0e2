package oidc

import (
	"context"
	"slices"
)

// The id_token_hint of an authorization request (OIDC Core 3.1.2.1): an ID token
// this issuer gave the client earlier, naming the person the client expects.
// palmgate reads it as it reads a logout's hint (parseIDTokenHint): signed by this
// issuer with one of its keys, `typ` JWT, expired or not (an ID token usually has
// expired by the time its client asks again). It must name the requesting client
// in `aud`; anything else is invalid_request, sent back to the client.
//
// Its `sub` is pairwise: the person's subject at the client's sector. The hint is
// compared with the browser's SSO session by deriving the session person's
// subject for the requesting client (PairwiseSubject with the client's sector)
// and comparing the two, so no hint is ever mapped back to a human. When they
// differ the session is not used: prompt=none answers login_required, and any
// other request asks for a palm scan (which starts a new session for whoever
// scans; the client sees that person's `sub` and may compare it with its hint).
// Without a session, or with sso_session off, the hint changes nothing: every
// login scans.

// IDTokenHintParam is the authorization request parameter of the hint.
const IDTokenHintParam = "id_token_hint"

// hintSubject checks the id_token_hint of an authorization request of cl and
// returns its `sub`. Its errors are OAuth faults (invalid_request), but for a
// store that cannot be read (the keys), returned as it is.
func (s *Service) hintSubject(ctx context.Context, cl *client, hint string) (string, error) {
	claims, err := s.parseIDTokenHint(ctx, hint)
	if err != nil {
		return "", err
	}
	if !slices.Contains([]string(claims.Audience), cl.id) {
		return "", oauthError(ErrInvalidRequest, "the id_token_hint was issued to another client")
	}
	if claims.Subject == "" {
		return "", oauthError(ErrInvalidRequest, "the id_token_hint lacks sub")
	}
	return claims.Subject, nil
}

// sessionMatchesHint reports whether humanID, the person of the browser's SSO
// session, is the person ar's id_token_hint names (true without a hint).
func (s *Service) sessionMatchesHint(ar *AuthRequest, humanID string) bool {
	return ar.hintSub == "" || PairwiseSubject(s.pairwiseSecret, ar.hintSector, humanID) == ar.hintSub
}

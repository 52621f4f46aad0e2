package oidc

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/palmgate/palmgate/core/keys"
)

// OpenID Connect Back-Channel Logout 1.0: when palmgate ends a login (a grant)
// of a client that registered a backchannel_logout_uri, for any reason but that
// client's own token revocation request (RFC 7009: it knows) or its deletion (it
// is gone), it signs a logout token and hands it to the LogoutSender, which POSTs
// it to the URI (edge/backchannel). The ends that notify: an RP-initiated logout
// with an id_token_hint (the initiating client is notified too: section 2.7
// allows it, and a relying party whose front end started the logout on another
// tab or instance learns of it the same way), the end of a person with
// revoke=grants (EndHuman), a refresh token or code used twice (the family is
// revoked). Each grant ended by a call is notified once, after its transaction
// committed, and only when it was live until then (a grant revoked before is
// not notified again). Every token carries `sid` (backchannel_logout_session_required
// is always honoured): the grant id, the `sid` of the client's ID tokens.

// TypeLogoutToken is the `typ` header of a logout token (BCL 2.4, RFC 8417 2.3).
const TypeLogoutToken = "logout+jwt"

// BackchannelLogoutEvent is the event member of a logout token's events claim.
const BackchannelLogoutEvent = "http://schemas.openid.net/event/backchannel-logout"

// LogoutTokenTTL is how long a logout token is valid (its exp after iat).
const LogoutTokenTTL = 2 * time.Minute

// BackchannelLogout is one logout token to deliver.
type BackchannelLogout struct {
	// ClientID is the client it is for (its aud), for logs and metrics.
	ClientID string
	// URI is the client's backchannel_logout_uri.
	URI string
	// Token is the signed logout token: never to be logged. Empty until Prepare
	// gave it.
	Token string
	// Restricted: the URI is a self-registered or metadata-document client's,
	// not the operator's: the sender refuses private and loopback addresses
	// (unless the operator allowed them for metadata documents).
	Restricted bool
	// Prepare, when not nil, gives URI and Token (both empty: the client has no
	// backchannel_logout_uri, nothing to send); the sender calls it when it
	// takes the logout from its queue, so that the token's iat and exp count
	// from then, and a metadata-document client's document (which may need a
	// fetch: a document host may take seconds to answer) is read off the request
	// that ended the login. The service gives every logout one.
	Prepare func(ctx context.Context) (uri, token string, err error)
}

// LogoutSender delivers logout tokens (edge/backchannel). Send must not block:
// it queues, or drops when its queue is full.
type LogoutSender interface {
	Send(BackchannelLogout)
}

// LogoutClaims are the claims of a logout token (BCL 2.4): no nonce.
type LogoutClaims struct {
	jwt.RegisteredClaims
	SID    string                    `json:"sid"`
	Events map[string]map[string]any `json:"events"`
}

// ended is a live grant a transaction ended: the client to notify and the person.
type ended struct {
	clientID, humanID string
}

// notifyEnded sends a logout token for each of rs that ended a live grant of a
// client with a backchannel_logout_uri. It runs after rs's transaction committed.
func (s *Service) notifyEnded(ctx context.Context, rs ...revocation) {
	if s.logoutSender == nil {
		return
	}
	for _, r := range rs {
		if r.ended == nil {
			continue
		}
		if id := r.ended.clientID; IsMetadataClientID(id) && s.clients.get(id) == nil {
			if s.clients.metadata != nil {
				s.logoutSender.Send(BackchannelLogout{ClientID: id, Restricted: true, Prepare: s.prepareLogout(*r.ended, r.grantID)})
			}
			continue
		}
		cl, err := s.clients.lookup(ctx, r.ended.clientID)
		if err != nil || cl == nil || cl.backchannelLogoutURI == "" {
			continue // a client gone or failing to read: nothing to tell, or no way to
		}
		// Signed when the sender takes it (Prepare), so that one that waited in
		// its queue is not past its exp when it arrives.
		e, grantID := *r.ended, r.grantID
		s.logoutSender.Send(BackchannelLogout{ClientID: cl.id, URI: cl.backchannelLogoutURI,
			Restricted: cl.selfRegistered || cl.anonymous,
			Prepare: func(context.Context) (string, string, error) {
				return s.signedLogout(cl, e, grantID)
			}})
	}
}

// prepareLogout is the BackchannelLogout.Prepare of a metadata-document
// client's grant grantID: its document read (or fetched) then.
func (s *Service) prepareLogout(e ended, grantID string) func(context.Context) (string, string, error) {
	return func(ctx context.Context) (string, string, error) {
		cl, err := s.clients.lookup(ctx, e.clientID)
		if err != nil {
			return "", "", err
		}
		return s.signedLogout(cl, e, grantID)
	}
}

// signedLogout is cl's backchannel_logout_uri and the logout token of grant
// grantID, signed now; both empty when cl is gone or names no URI. A signing
// error (no active key) fails the ID tokens the same way.
func (s *Service) signedLogout(cl *client, e ended, grantID string) (uri, token string, err error) {
	if cl == nil || cl.backchannelLogoutURI == "" {
		return "", "", nil
	}
	if token, err = s.logoutToken(cl, e.humanID, grantID); err != nil {
		return "", "", err
	}
	return cl.backchannelLogoutURI, token, nil
}

// logoutToken signs the logout token of grant grantID of humanID for cl, with
// the algorithm of its ID tokens.
func (s *Service) logoutToken(cl *client, humanID, grantID string) (string, error) {
	now := s.now()
	return s.keys.Sign(orDefault(cl.idTokenAlg, keys.RS256), TypeLogoutToken, LogoutClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: s.issuer, Subject: PairwiseSubject(s.pairwiseSecret, cl.sector, humanID),
			Audience: jwt.ClaimStrings{cl.id}, IssuedAt: jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(LogoutTokenTTL)), ID: uuid.NewString(),
		},
		SID:    grantID,
		Events: map[string]map[string]any{BackchannelLogoutEvent: {}},
	})
}

// CheckBackchannelLogoutURI checks a backchannel_logout_uri (BCL 2.2): an
// absolute http or https URL without a fragment; https unless operator (the
// operator's clients may name an intranet application over http). Unlike a
// redirect URI's, a loopback host is no exception: it is palmgate's own
// machine, not the developer's, and a plain http service there (Caddy's admin
// API) is what a developer's URI must not reach when the operator allowed
// private addresses.
func CheckBackchannelLogoutURI(uri string, operator bool) error {
	u, err := url.Parse(uri)
	switch {
	case err != nil || !u.IsAbs() || u.Hostname() == "" || u.Opaque != "":
		return clientErr(ErrClientInvalid, "backchannel_logout_uri %.200q must be an absolute http or https URL", uri)
	case u.Port() != "" && !validPort(u.Port()):
		return clientErr(ErrClientInvalid, "backchannel_logout_uri %.200q has no valid port (1 to 65535)", uri)
	case u.Scheme != "https" && u.Scheme != "http":
		return clientErr(ErrClientInvalid, "backchannel_logout_uri %.200q must be an http or https URL", uri)
	case u.Fragment != "" || u.RawFragment != "" || strings.Contains(uri, "#"):
		return clientErr(ErrClientInvalid, "backchannel_logout_uri %.200q must not have a fragment", uri)
	case u.User != nil:
		return clientErr(ErrClientInvalid, "backchannel_logout_uri %.200q must not carry a user or password", uri)
	case u.Scheme == "http" && !operator:
		return clientErr(ErrClientInvalid, "backchannel_logout_uri %.200q must use https", uri)
	}
	return nil
}

package oidc

import (
	"context"
	"net/url"
	"slices"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/keys"
)

// idTokenHintParser reads an id_token_hint. Its signature and `typ` are checked by
// the key function, its issuer by EndSession; its times are not: OpenID Connect
// RP-Initiated Logout 1.0 section 2 asks the OP to accept an expired ID token it
// issued (a person often signs out long after their ID token expired).
var idTokenHintParser = jwt.NewParser(
	jwt.WithValidMethods(keys.Algorithms),
	jwt.WithStrictDecoding(),
	jwt.WithoutClaimsValidation(),
)

// Logout is the outcome of an RP-initiated logout request.
type Logout struct {
	// ClientID is the client the request came from ("" when neither client_id nor
	// id_token_hint named one).
	ClientID string
	// GrantID is the grant (the `sid` of the id_token_hint) that was revoked; ""
	// when the request had no hint, so nothing could be revoked.
	GrantID string
	// Logins counts the live logins the request ended: the hint's and every
	// other made through its SSO session (or the browser's, of the same
	// person); 0 without a hint.
	Logins int
	// BrowserKept: the browser's own SSO session (its cookie) is another
	// person's than the hint's, or the hint's login had ended already, so the
	// logins made through that session went on (the edge still ends the
	// session itself): its page must not say this person's sign-ins ended.
	BrowserKept bool
	// SessionEnded: the browser's own SSO session was live and ended with the
	// logins (single logout drops it; EndSSOSession then finds none).
	SessionEnded bool
	// RedirectURI is the registered post_logout_redirect_uri to send the browser
	// back to, and State the state to echo there; "" means show the signed-out page.
	RedirectURI string
	State       string
	// Confirm: RedirectURI is an anonymous registrant's (RFC 7591, a client ID
	// metadata document) and the request carried no id_token_hint of a login of
	// its client live until now (a replayed hint ends nothing), so nothing shows
	// that anyone signed in there: anyone's link to the
	// logout endpoint would redirect on to a page its registrant chose, under the
	// issuer's name (an open redirector, RFC 9700 4.11.2). The edge ends the
	// session, then shows the signed-out page with one link to URL.
	Confirm bool
}

// URL is the post-logout redirect with its state, or "" when there is none.
func (l *Logout) URL() string {
	if l.RedirectURI == "" {
		return ""
	}
	if l.State == "" {
		return l.RedirectURI
	}
	return withParams(l.RedirectURI, url.Values{"state": {l.State}}) // the registered query kept
}

// EndSession answers an RP-initiated logout request (OpenID Connect RP-Initiated
// Logout 1.0): its parameters id_token_hint, client_id, post_logout_redirect_uri,
// state (and ui_locales, logout_hint, which change nothing here).
//
// Logging out ends the login the client holds (and the edge ends the browser's
// SSO session, EndSSOSession): the grant named by the
// hint's `sid` is revoked, its refresh family and its access tokens stop working.
// It is single logout (singlelogout.go): every login made through the SSO
// session the hint's login was made through ends with it, and that session.
// A request without a hint cannot name a login: it revokes nothing (the caller
// shows the signed-out page, or redirects when a client and a registered
// post_logout_redirect_uri were given).
//
// Errors are faults with code invalid_request, never carrying a redirect: an
// unregistered post_logout_redirect_uri, one without a client to check it against,
// a client_id other than the hint's audience, a hint this issuer did not sign.
func (s *Service) EndSession(ctx context.Context, params url.Values) (*Logout, error) {
	return s.EndSessionFrom(ctx, params, "")
}

// EndSessionFrom is EndSession from the browser holding the SSO session id
// browser (its cookie; "" for none, a server's backend logout): with a hint of
// the same person, the logins made through that session end too.
func (s *Service) EndSessionFrom(ctx context.Context, params url.Values, browser string) (*Logout, error) {
	for name, values := range params {
		if len(values) > 1 {
			return nil, oauthError(ErrInvalidRequest, "parameter %s is given more than once", name)
		}
	}
	hint, clientID := params.Get("id_token_hint"), params.Get("client_id")
	redirect, state := params.Get("post_logout_redirect_uri"), params.Get("state")
	if len(state) > MaxStateLen {
		return nil, oauthError(ErrInvalidRequest, "state is longer than %d characters", MaxStateLen)
	}
	out := &Logout{ClientID: clientID}
	var hintSub string
	var cl *client // static or dynamic (read from the store now)
	if clientID != "" {
		var err error
		if cl, err = s.clients.lookup(ctx, clientID); err != nil {
			return nil, err
		}
		if cl == nil {
			return nil, oauthError(ErrInvalidRequest, "unknown client_id")
		}
	}
	if hint != "" {
		claims, err := s.parseIDTokenHint(ctx, hint)
		if err != nil {
			return nil, err
		}
		aud := []string(claims.Audience)
		switch {
		case clientID != "" && !slices.Contains(aud, clientID):
			return nil, oauthError(ErrInvalidRequest, "client_id is not the audience of the id_token_hint")
		case clientID == "" && len(aud) == 1:
			out.ClientID = aud[0]
		case clientID == "":
			return nil, oauthError(ErrInvalidRequest, "the id_token_hint has several audiences: give client_id")
		}
		if cl == nil {
			if cl, err = s.clients.lookup(ctx, out.ClientID); err != nil {
				return nil, err
			}
			if cl == nil {
				return nil, oauthError(ErrInvalidRequest, "the id_token_hint is for an unknown client")
			}
		}
		out.GrantID, hintSub = claims.GrantID, claims.Subject
	}
	if redirect != "" {
		if cl == nil {
			return nil, oauthError(ErrInvalidRequest, "post_logout_redirect_uri needs client_id or id_token_hint to check it against")
		}
		if !slices.Contains(cl.postLogoutRedirectURIs, redirect) {
			return nil, oauthError(ErrInvalidRequest, "post_logout_redirect_uri is not registered for this client")
		}
		out.RedirectURI, out.State = redirect, state
	}
	ended := event.Event{Kind: event.Logout, Outcome: event.NoSession, ClientID: out.ClientID}
	live := false // the hint's login was live until this request
	if out.GrantID != "" {
		r, err := s.endLogins(ctx, out.GrantID, hintSub, cl, browser)
		if err != nil {
			return nil, err
		}
		live, out.Logins, ended.HumanID, out.BrowserKept, out.SessionEnded = r.live, r.logins, r.humanID, r.browserKept, r.browserEnded
		ended.Outcome = event.Revoked
	}
	// A hint names cl (it is one of the hint's audience, above), but only a login
	// it ends now shows someone signed in there: ID tokens are taken expired, so a
	// hint of the registrant's own, replayed, would redirect anyone (fourth review).
	out.Confirm = out.RedirectURI != "" && cl.anonymous && !live
	s.events.Emit(ctx, ended)
	return out, nil
}

// parseIDTokenHint checks that hint is an ID token this issuer signed, expired or
// not, and returns its claims.
func (s *Service) parseIDTokenHint(ctx context.Context, hint string) (*IDClaims, error) {
	var claims IDClaims
	_, err := idTokenHintParser.ParseWithClaims(hint, &claims, s.keyFunc(ctx, TypeIDToken))
	if unavailableKey(err) {
		return nil, err
	}
	if err != nil {
		return nil, oauthError(ErrInvalidRequest, "the id_token_hint is not an ID token this issuer signed")
	}
	if claims.Issuer != s.issuer {
		return nil, oauthError(ErrInvalidRequest, "the id_token_hint was issued by %.100q, not this issuer", claims.Issuer)
	}
	if claims.GrantID == "" || len(claims.Audience) == 0 {
		return nil, oauthError(ErrInvalidRequest, "the id_token_hint lacks sid or aud")
	}
	return &claims, nil
}

package oidc

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/jsontime"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/core/records"
	"github.com/palmgate/palmgate/storage"
)

// Bounds of authorization request parameters.
const (
	MaxStateLen  = 500
	MaxNonceLen  = 500
	maxScopes    = 20
	maxScopeLen  = 64
	codeBytes    = 32
	pkceS256     = "S256"
	pkcePlain    = "plain"
	authorizeKey = "authorize"
)

var (
	scopeToken = regexp.MustCompile(`^[\x21\x23-\x5B\x5D-\x7E]+$`) // RFC 6749 3.3
)

// AuthRequestStatus is the state of an authorization request.
type AuthRequestStatus string

// The states of an authorization request.
const (
	RequestPending  AuthRequestStatus = "pending"
	RequestVerified AuthRequestStatus = "verified"
	RequestDenied   AuthRequestStatus = "denied"
	RequestAnswered AuthRequestStatus = "answered" // the code or the error went back
	// RequestEnded: verified, then the operator ended the person (EndHuman)
	// before the browser fetched the answer: access_denied, no session.
	RequestEnded AuthRequestStatus = "ended"
)

// AuthRequest is a validated authorization request waiting for its palm scan.
type AuthRequest struct {
	ID            string   `json:"id"`
	ClientID      string   `json:"clientId"`
	RedirectURI   string   `json:"redirectUri"`
	Scopes        []string `json:"scopes"`
	Resource      string   `json:"resource,omitempty"` // RFC 8707: the access tokens' aud
	State         string   `json:"state,omitempty"`
	Nonce         string   `json:"nonce,omitempty"`
	CodeChallenge string   `json:"codeChallenge,omitempty"`
	// ResponseMode is how the answer goes back to the client: ResponseModeQuery
	// (also for requests stored before it existed, "") or ResponseModeFormPost.
	ResponseMode string            `json:"responseMode,omitempty"`
	ChallengeID  string            `json:"challengeId"`
	Status       AuthRequestStatus `json:"status"`
	HumanID      string            `json:"humanId,omitempty"`
	AuthTime     time.Time         `json:"authTime,omitzero"`
	ExpiresAt    time.Time         `json:"expiresAt"`
	// BrowserHash is the SHA-256 of the binding secret of the browser that made the
	// request (its login cookie): only that browser sees the nonce or gets the code.
	BrowserHash string `json:"browserHash"`
	// SessionHash is the SHA-256 of the SSO session id that answered the request
	// (no palm scan; see session.go); "" for a request a scan answers.
	SessionHash string `json:"sessionHash,omitempty"`
	// RequestedActor is the deviceId of the agent the human is asked to let act
	// for them (requested_actor, actor.go); "" for a plain login.
	RequestedActor string `json:"requestedActor,omitempty"`
	// ActorUntil ends the agent's grant before the longest a grant lives
	// (requested_actor_until, actor_until.go); zero without.
	ActorUntil time.Time `json:"actorUntil,omitzero"`
	// Anonymous: the client's redirect URIs are an anonymous registrant's (RFC
	// 7591, a metadata document): an answer nobody asked for (the scan expired)
	// is not redirected unseen (Redirect.Confirm).
	Anonymous bool `json:"anonymous,omitempty"`

	// Answer, set by Authorize only, is the answer the SSO session gave at once
	// (a code, no scan, no page): the edge sends it back to the client.
	Answer *Redirect `json:"-"`
	// prompt and maxAge are the request's prompt values and max_age (-1 without).
	prompt []string
	maxAge int
	// hintSub is the `sub` of the request's id_token_hint ("" without), a subject
	// at hintSector, the client's sector (hint.go).
	hintSub, hintSector string
}

// Browser is what the edge knows of the browser that sends an authorization
// request.
type Browser struct {
	// Binding is the secret of the browser's login cookie (256 bits, random).
	Binding string
	// IP is the browser's address, and Summary its user agent in words ("Chrome on
	// Windows"); the person's app shows both before they consent.
	IP, Summary string
	// Address is the browser's address as the edge counts it (an IPv6 one by its
	// /64), which the per-network cap of pending logins counts the login under;
	// "" when the edge counts no address (rate_limit off).
	Address string
	// Session is the id of the browser's SSO session (its cookie), "" without.
	Session string
}

// MinBindingLen is the shortest binding secret Authorize accepts.
const MinBindingLen = 32

// ErrOtherBrowser refuses the login page, its nonce and its code to a browser that
// did not start the login.
var ErrOtherBrowser = &fault.Error{Class: fault.Forbidden, Code: ErrAccessDenied,
	Message: "this sign-in was started in another browser; finish it there, or start again here"}

func bindingHash(binding string) string {
	sum := sha256.Sum256([]byte(binding))
	return hex.EncodeToString(sum[:])
}

// boundTo reports, in constant time, whether binding is the secret of the browser
// that made the request.
func (ar *AuthRequest) boundTo(binding string) bool {
	return binding != "" && subtle.ConstantTimeCompare([]byte(bindingHash(binding)), []byte(ar.BrowserHash)) == 1
}

// ClientName is the display name of the request's client.
func (s *Service) ClientName(ar *AuthRequest) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if cl, _ := s.clients.lookup(ctx, ar.ClientID); cl != nil {
		return cl.name
	}
	return ar.ClientID
}

// Response modes (OAuth 2.0 Multiple Response Type Encoding Practices, OAuth 2.0
// Form Post Response Mode).
const (
	ResponseModeQuery    = "query"
	ResponseModeFormPost = "form_post"
)

// ResponseModes are the response modes palmgate answers in (discovery's
// response_modes_supported).
var ResponseModes = []string{ResponseModeQuery, ResponseModeFormPost}

// Authorize validates an authorization request (its query or form parameters) from
// browser, stores it with a fresh palm challenge, and returns it. Within the
// browser's SSO session (session.go) no challenge is made: the request comes back
// answered (Answer: a code) or waiting for consent (Status RequestConsent).
// prompt=none never waits: it is answered, or refused with login_required or
// consent_required sent back to the client.
//
// Errors before the client and its redirect_uri are known good (a missing, unknown
// or repeated client_id or redirect_uri, an unregistered redirect_uri) carry no
// RedirectURI: they are never sent to the redirect_uri. Every later refusal of the
// request goes back to the client (RFC 6749 4.1.2.1, OIDC Core 3.1.2.6): a
// *RedirectError with the fault, the redirect_uri, the state (not when it is longer than MaxStateLen or given
// twice: it is then dropped, not echoed) and the response mode (query when the
// response_mode itself is refused). A failure of the server (the store, the caps
// on pending logins) is returned as it is.
func (s *Service) Authorize(ctx context.Context, params url.Values, browser Browser) (*AuthRequest, error) {
	if len(browser.Binding) < MinBindingLen {
		return nil, errors.New("authorize: the browser binding secret is missing or short")
	}
	for _, name := range []string{"client_id", "redirect_uri"} {
		if len(params[name]) > 1 {
			return nil, oauthError(ErrInvalidRequest, "parameter %s is given more than once", name)
		}
	}
	clientID, redirectURI := params.Get("client_id"), params.Get("redirect_uri")
	if clientID == "" {
		return nil, oauthError(ErrInvalidRequest, "client_id is required")
	}
	cl, err := s.clients.lookup(ctx, clientID)
	if err != nil {
		return nil, err
	}
	if cl == nil {
		return nil, fault.Of(ErrUnknownClient, "unknown client_id")
	}
	if redirectURI == "" {
		return nil, oauthError(ErrInvalidRequest, "redirect_uri is required")
	}
	if len(cl.redirectURIs) == 0 { // a static client that only introspects and revokes
		return nil, fault.Of(ErrRedirectURINotRegistered, "client %s has no redirect_uri: it may introspect and revoke tokens, not log anyone in (its client block needs a redirect_uri for that)", cl.id)
	}
	if !cl.allowsRedirect(redirectURI) {
		return nil, fault.Of(ErrRedirectURINotRegistered, "redirect_uri is not registered for this client")
	}
	// From here on every refusal goes back to the client.
	back := &RedirectError{RedirectURI: redirectURI, ResponseMode: ResponseModeQuery, Confirm: cl.anonymous}
	if states := params["state"]; len(states) == 1 && len(states[0]) <= MaxStateLen {
		back.State = states[0]
	}
	ar, err := s.checkRequest(cl, params, back)
	if err == nil && params.Get(IDTokenHintParam) != "" {
		ar.hintSector = cl.sector
		ar.hintSub, err = s.hintSubject(ctx, cl, params.Get(IDTokenHintParam))
	}
	if err != nil {
		var f *fault.Error
		if errors.As(err, &f) && IsOAuthCode(f.Code) {
			back.Fault = f
			return nil, back
		}
		return nil, err
	}
	// An agent's grant needs a palm scan: no SSO session answers it.
	if ar.RequestedActor == "" {
		if done, err := s.authorizeInSession(ctx, ar, browser, back); done != nil || err != nil {
			return done, err
		}
	}
	now := s.now().UTC()
	ar.ID, ar.Status, ar.ExpiresAt, ar.BrowserHash = uuid.NewString(), RequestPending, now.Add(s.loginTTL), bindingHash(browser.Binding)
	req := palm.Request{
		ClientName: cl.name, Scopes: ar.Scopes, ScopeDescriptions: DescribeRequest(ar.Scopes, ar.Resource),
		RequestedAt: jsontime.Time(now), BrowserIP: browser.IP, BrowserSummary: browser.Summary, Address: browser.Address,
		ActorDeviceID: ar.RequestedActor, ActorUntil: jsontime.Time(s.ActorGrantEnd(ar)),
	}
	if cl.selfRegistered {
		req.SelfRegistered, req.ClientNotice = true, cl.notice
	}
	c, err := s.palm.New(palm.PurposeLogin, ar.ID, req, s.loginTTL)
	if err != nil {
		return nil, err
	}
	ar.ChallengeID = c.ID
	err = s.store.Update(ctx, func(txn storage.Txn) error {
		if err := s.putAuthRequest(txn, ar); err != nil {
			return err
		}
		return s.palm.PutChallenge(txn, c)
	})
	if err != nil {
		return nil, err
	}
	s.events.Emit(ctx, event.Event{Kind: event.Login, Outcome: event.Started, ClientID: ar.ClientID})
	return ar, nil
}

// checkRequest checks the parameters of an authorization request of cl, whose
// redirect_uri is valid, and returns the request to store. It sets
// back.ResponseMode as soon as the response_mode is known good, so that the
// refusals after it go back in that mode.
func (s *Service) checkRequest(cl *client, params url.Values, back *RedirectError) (*AuthRequest, error) {
	switch mode := params["response_mode"]; {
	case len(mode) > 1:
		return nil, oauthError(ErrInvalidRequest, "parameter response_mode is given more than once")
	case len(mode) == 0 || mode[0] == ResponseModeQuery:
	case mode[0] == ResponseModeFormPost && PrivateUseRedirect(back.RedirectURI):
		// A form_post page posts from the browser: an app's private-use scheme
		// (redirect_private.go) takes no POST. Refused in query mode.
		return nil, oauthError(ErrInvalidRequest, "response_mode form_post is not for a private-use scheme redirect_uri: use query")
	case mode[0] == ResponseModeFormPost:
		back.ResponseMode = ResponseModeFormPost
	default:
		return nil, oauthError(ErrInvalidRequest, "response_mode %.40q is not supported (query or form_post)", mode[0])
	}
	for name, values := range params {
		if len(values) > 1 && name != "resource" { // resource: see client.permits
			return nil, oauthError(ErrInvalidRequest, "parameter %s is given more than once", name)
		}
	}
	state := params.Get("state")
	if len(state) > MaxStateLen {
		return nil, oauthError(ErrInvalidRequest, "state is longer than %d characters", MaxStateLen)
	}
	if err := refuseRequestObject(params); err != nil {
		return nil, err
	}
	switch rt := params.Get("response_type"); rt {
	case "code":
	case "":
		return nil, oauthError(ErrInvalidRequest, "response_type is required")
	default:
		return nil, oauthError(ErrUnsupportedResponseType, "response_type must be code")
	}
	scopes, err := parseScopes(params.Get("scope"), len(params["resource"]) > 0)
	if err != nil {
		return nil, err
	}
	resource, err := s.permits(cl, scopes, params["resource"])
	if err != nil {
		return nil, err
	}
	scopes = cl.withoutRefresh(scopes)
	nonce := params.Get("nonce")
	if len(nonce) > MaxNonceLen {
		return nil, oauthError(ErrInvalidRequest, "nonce is longer than %d characters", MaxNonceLen)
	}
	challenge, method := params.Get("code_challenge"), params.Get("code_challenge_method")
	switch {
	case challenge == "" && method != "":
		return nil, oauthError(ErrInvalidRequest, "code_challenge_method without code_challenge")
	case challenge != "" && method != pkceS256:
		return nil, oauthError(ErrInvalidRequest, "code_challenge_method must be S256 (plain is not supported)")
	case challenge != "" && !pkceString.MatchString(challenge):
		return nil, oauthError(ErrInvalidRequest, "code_challenge must be 43 to 128 unreserved characters")
	}
	if challenge == "" && cl.public {
		return nil, oauthError(ErrInvalidRequest, "code_challenge is required: a public client must use PKCE (S256)")
	}
	maxAge, err := checkMaxAge(params)
	if err != nil {
		return nil, err
	}
	prompt := strings.Fields(params.Get("prompt"))
	for _, p := range prompt {
		if !slices.Contains(promptValues, p) {
			return nil, oauthError(ErrInvalidRequest, "prompt value %.40q is not supported", p)
		}
	}
	if slices.Contains(prompt, "none") && len(prompt) > 1 {
		return nil, oauthError(ErrInvalidRequest, "prompt=none cannot be combined with other values")
	}
	actor, err := checkRequestedActor(params.Get(RequestedActorParam))
	if err != nil {
		return nil, err
	}
	if actor != "" && !cl.allowsGrant(GrantTypeJWTBearer) { // the grant it asks for serves that grant only
		return nil, oauthError(ErrUnauthorizedClient, "requested_actor: the client is not registered for the grant type %s", GrantTypeJWTBearer)
	}
	if actor != "" && slices.Contains(prompt, "none") {
		return nil, oauthError(ErrLoginRequired, "letting an agent act for a person needs a palm scan: not with prompt=none")
	}
	until, err := s.checkActorUntil(params.Get(RequestedActorUntilParam), actor)
	if err != nil {
		return nil, err
	}
	return &AuthRequest{
		ClientID: cl.id, RedirectURI: back.RedirectURI, Scopes: scopes, Resource: resource,
		State: state, Nonce: nonce, CodeChallenge: challenge, ResponseMode: back.ResponseMode,
		prompt: prompt, maxAge: maxAge, RequestedActor: actor, ActorUntil: until, Anonymous: cl.anonymous,
	}, nil
}

// promptValues are the prompt values palmgate accepts (OIDC Core 3.1.2.1). A palm
// scan is a login, a consent and an account choice: login and select_account force
// a scan (within an SSO session too: the palm that scans chooses the account),
// consent the consent page within an SSO session; none is answered from the SSO
// session or refused (session.go).
var promptValues = []string{"none", "login", "consent", "select_account"}

// maxMaxAge bounds max_age (ten years of seconds): a larger number is not a
// client's intent, and would overflow a duration.
const maxMaxAge = 10 * 365 * 24 * 3600

// checkMaxAge checks max_age (OIDC Core 3.1.2.1): a number of seconds, or -1
// without one. A fresh palm scan meets any; an SSO session only one its scan's
// age is within (0 always asks for a new scan).
func checkMaxAge(params url.Values) (int, error) {
	raw := params.Get("max_age")
	if raw == "" { // RFC 6749 3.1: a parameter without a value is as if omitted
		return -1, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 0 || n > maxMaxAge || len(raw) > 12 {
		return 0, oauthError(ErrInvalidRequest, "max_age %.20q is not a number of seconds", raw)
	}
	return n, nil
}

func (s *Service) putAuthRequest(txn storage.Txn, ar *AuthRequest) error {
	b, err := json.Marshal(ar)
	if err != nil {
		return fmt.Errorf("encoding authorization request: %w", err)
	}
	return txn.Set(authRequestKey(ar.ID), b, palm.KeepFor(s.now(), ar.ExpiresAt, ar.HumanID != ""))
}

func getAuthRequest(txn storage.Txn, id string) (*AuthRequest, error) {
	notFound := fault.Of(ErrUnknownAuthRequest, "unknown or expired auth_request_id")
	if _, err := uuid.Parse(id); err != nil || len(id) != 36 {
		return nil, notFound
	}
	return records.Get[AuthRequest](txn, authRequestKey(id), notFound, "authorization request "+id)
}

// Redirect is the answer of an authorization request that goes back to the client:
// the redirect_uri with either a code or an error (and its description), the state
// and the issuer, in the request's response mode.
type Redirect struct {
	URI         string
	Code        string
	Error       string
	Description string
	State       string
	// Issuer, when set, is sent as `iss` (RFC 9207).
	Issuer string
	// Mode is the response mode: ResponseModeQuery ("" too) or ResponseModeFormPost.
	Mode string
	// Confirm (fourth review): an error no one asked for (a login page left open
	// until its scan expired) to an anonymous registrant's URI (AuthRequest.
	// Anonymous): the edge shows a page with one link on, as for
	// RedirectError.Confirm, not a redirect of a tab nobody touched.
	Confirm bool
}

// FormPost reports whether the answer is an auto-submitted form POSTed to URI
// (OAuth 2.0 Form Post Response Mode) rather than a redirect to URL.
func (r *Redirect) FormPost() bool { return r.Mode == ResponseModeFormPost }

// Params are the response parameters.
func (r *Redirect) Params() url.Values {
	q := url.Values{}
	for _, p := range [][2]string{{"code", r.Code}, {"error", r.Error}, {"error_description", DescriptionChars(r.Description)}, {"state", r.State}, {"iss", r.Issuer}} {
		if p[1] != "" {
			q.Set(p[0], p[1])
		}
	}
	return q
}

// URL is the redirect's full URL in query mode: the redirect_uri with the response
// parameters added to its own query.
func (r *Redirect) URL() string {
	return withParams(r.URI, r.Params()) // the registered query kept (redirect_query.go)
}

// Finish answers a login whose palm challenge has ended, to the browser that made
// it (ErrOtherBrowser to any other): a code once verified, access_denied once
// denied or expired. It answers once; a later call is an error. A pending login
// returns (nil, nil).
func (s *Service) Finish(ctx context.Context, id, binding string) (*Redirect, error) {
	r, _, err := s.finish(ctx, id, binding, "")
	return r, err
}

// finish is Finish that, for a verified login with sso_session on, also starts
// the browser's SSO session (a new id, ending the one it held, old).
func (s *Service) finish(ctx context.Context, id, binding, old string) (*Redirect, *Session, error) {
	if err := s.checkRedirectStill(ctx, id, binding); err != nil {
		return nil, nil, err
	}
	code, err := randomToken(codeBytes)
	if err != nil {
		return nil, nil, err
	}
	sessionID, err := randomToken(sessionIDBytes)
	if err != nil {
		return nil, nil, err
	}
	// The agent a verified login asks for (requested_actor) and whom it is
	// registered to: looked up outside the transaction, only when a verified
	// login names one (errNeedActorOwner), then the transaction runs again.
	var actor, owner string
	for {
		redirect, session, err := s.finishWith(ctx, id, binding, old, code, sessionID, actor, owner)
		var need errNeedActorOwner
		if !errors.As(err, &need) {
			return redirect, session, err
		}
		if actor != "" || s.agents == nil { // looked up already: never loop
			return nil, nil, fmt.Errorf("oidc: the agent %q of a login was not looked up", need.actor)
		}
		actor = need.actor
		if _, owner, err = s.agents.AgentKey(ctx, actor); err != nil {
			return nil, nil, err
		}
	}
}

// errNeedActorOwner stops the transaction that answers a verified login naming
// an agent whose owner finish has not looked up yet.
type errNeedActorOwner struct{ actor string }

func (e errNeedActorOwner) Error() string { return "the owner of agent " + e.actor + " is needed" }

// VerifiedLoginWindow is how long after its palm scan a login may be finished:
// its page fetches the answer within seconds, or a few minutes when a phone
// suspended the tab while the palm app ran. A login finished later (a tab left
// open, a replayed login cookie) is access_denied, not a code and a new SSO
// session hours after the scan.
const VerifiedLoginWindow = 10 * time.Minute

// finishWith is one try of finish with the owner of the agent actor looked up
// (both "" before any lookup).
func (s *Service) finishWith(ctx context.Context, id, binding, old, code, sessionID, actor, owner string) (*Redirect, *Session, error) {
	var redirect *Redirect
	var answered event.Event // fn may run again: each run sets it anew
	var session *Session
	var replaced revocation // an agent grant the login's consent replaced
	err := s.store.Update(ctx, func(txn storage.Txn) error {
		redirect, answered, session, replaced = nil, event.Event{}, nil, revocation{}
		ar, err := getAuthRequest(txn, id)
		if err != nil {
			return err
		}
		if !ar.boundTo(binding) {
			return ErrOtherBrowser
		}
		if ar.Status == RequestAnswered {
			return oauthError(ErrInvalidRequest, "this authorization request was already answered")
		}
		c, err := palm.GetChallenge(txn, ar.ChallengeID)
		if err != nil {
			return err
		}
		answered = event.Event{Kind: event.Login, ClientID: ar.ClientID, HumanID: ar.HumanID}
		if ar.Status == RequestEnded {
			answered.Outcome = event.Denied
			redirect = &Redirect{URI: ar.RedirectURI, Error: ErrAccessDenied, Description: "the person's palmgate sessions were ended: sign in again",
				State: ar.State, Issuer: s.issuer, Mode: ar.ResponseMode}
			ar.Status = RequestAnswered
			return s.putAuthRequest(txn, ar)
		}
		switch st := c.StatusAt(s.now()); st {
		case palm.StatusPending:
			return nil
		case palm.StatusVerified:
			if s.now().After(ar.AuthTime.Add(VerifiedLoginWindow)) {
				answered.Outcome = event.Expired
				redirect = &Redirect{URI: ar.RedirectURI, Error: ErrAccessDenied, Description: "the palm scan is too old: sign in again",
					State: ar.State, Issuer: s.issuer, Mode: ar.ResponseMode, Confirm: ar.Anonymous}
				ar.Status = RequestAnswered
				return s.putAuthRequest(txn, ar)
			}
			if ar.RequestedActor != "" && ar.RequestedActor != actor && s.agents != nil {
				return errNeedActorOwner{actor: ar.RequestedActor}
			}
			answered.Outcome = event.Completed
			if redirect, replaced, err = s.consentActor(txn, ar, actor, owner); err != nil || redirect != nil {
				if redirect != nil {
					answered.Outcome = event.Denied
					ar.Status = RequestAnswered
					err = s.putAuthRequest(txn, ar)
				}
				return err
			}
			// The scan starts the session (below) through which this login is made.
			var through string
			if s.ssoTTL > 0 {
				through = sessionHash(sessionID)
			}
			if err := s.putCode(txn, code, ar, through, s.now().Add(s.ssoTTL)); err != nil {
				return err
			}
			redirect = &Redirect{URI: ar.RedirectURI, Code: code, State: ar.State, Issuer: s.issuer, Mode: ar.ResponseMode}
			if s.ssoTTL > 0 {
				if session, err = s.startSession(txn, sessionID, old, ar); err != nil {
					return err
				}
			}
		default:
			answered.Outcome = event.Denied
			if st == palm.StatusExpired {
				answered.Outcome = event.Expired
			}
			redirect = &Redirect{URI: ar.RedirectURI, Error: ErrAccessDenied, Description: "the palm scan was declined or expired",
				State: ar.State, Issuer: s.issuer, Mode: ar.ResponseMode, Confirm: st == palm.StatusExpired && ar.Anonymous}
		}
		ar.Status = RequestAnswered
		return s.putAuthRequest(txn, ar)
	})
	if err != nil {
		return nil, nil, err
	}
	s.committed(replaced)
	if redirect != nil {
		s.events.Emit(ctx, answered)
	}
	return redirect, session, nil
}

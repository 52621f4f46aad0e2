package oidc

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/core/records"
	"github.com/palmgate/palmgate/storage"
)

// codeRecord is a stored authorization code, bound to everything it may be used with.
type codeRecord struct {
	ClientID      string    `json:"clientId"`
	RedirectURI   string    `json:"redirectUri,omitzero"`
	Scopes        []string  `json:"scopes,omitzero"`
	Resource      string    `json:"resource,omitempty"`
	Nonce         string    `json:"nonce,omitempty"`
	CodeChallenge string    `json:"codeChallenge,omitempty"`
	HumanID       string    `json:"humanId"`
	AuthTime      time.Time `json:"authTime,omitzero"`
	ExpiresAt     time.Time `json:"expiresAt"`
	// GrantID is set once the code has been exchanged: a second use revokes it.
	GrantID string `json:"grantId,omitempty"`
	// PlannedGrant is the id of the grant the exchange starts, decided when a
	// code is issued through an SSO session (its index entry, ssogrants.go,
	// names it); "" in a code of an earlier release, which gets a new id then.
	PlannedGrant string `json:"plannedGrantId,omitempty"`
	// Session is the hash of the SSO session the code was issued through ("" for
	// none): the grant records it; SessionEnd is when that session ends, until
	// which the grant is kept.
	Session    string    `json:"sessionHash,omitempty"`
	SessionEnd time.Time `json:"sessionEnd,omitzero"`
}

// used is the record of rec once exchanged for grantID: what a second use needs
// (its client, human and expiry, and the grant to revoke), nothing of its request.
// A code issued keeps everything it is bound to until then; the omitzero fields
// are never empty in it.
func (rec codeRecord) used(grantID string) codeRecord {
	return codeRecord{ClientID: rec.ClientID, HumanID: rec.HumanID, ExpiresAt: rec.ExpiresAt, GrantID: grantID,
		PlannedGrant: rec.PlannedGrant, Session: rec.Session, SessionEnd: rec.SessionEnd}
}

// grant is what one code exchange started: its refresh family and its revocation.
// Every token issued from it carries its id as `sid`.
type grant struct {
	ClientID   string    `json:"clientId"`
	HumanID    string    `json:"humanId"`
	Scopes     []string  `json:"scopes"`
	Resource   string    `json:"resource,omitempty"` // the aud of its access tokens (RFC 8707)
	AuthTime   time.Time `json:"authTime"`
	RefreshJTI string    `json:"refreshJti,omitempty"`
	Revoked    bool      `json:"revoked,omitempty"`
	ExpiresAt  time.Time `json:"expiresAt"`
	// Session is the hash of the SSO session the login was made through ("" for
	// none, or a grant of an earlier release): a logout with its ID token as
	// id_token_hint ends that session's logins (singlelogout.go).
	Session string `json:"session,omitempty"`
	// KeepUntil keeps the record in the store past ExpiresAt, until its SSO
	// session ends (zero for none): a login without offline_access is then still
	// found, and its client told, by a single logout after its tokens expired
	// (the client's own session may live on). It changes no token's life.
	KeepUntil time.Time `json:"keepUntil,omitzero"`
}

// TokenResponse is the answer of the token endpoint (the spec's table).
type TokenResponse struct {
	AccessToken           string `json:"access_token"`
	TokenType             string `json:"token_type"`
	ExpiresIn             int64  `json:"expires_in"`
	Scope                 string `json:"scope"`
	IDToken               string `json:"id_token,omitempty"` // none when the scopes lack openid (a narrowed refresh)
	RefreshToken          string `json:"refresh_token,omitempty"`
	RefreshTokenExpiresIn int64  `json:"refresh_token_expires_in,omitempty"`
}

// AccessClaims are the claims of an access token (RFC 9068).
type AccessClaims = bearer.Claims

// IDClaims are the claims of an ID token.
type IDClaims struct {
	jwt.RegisteredClaims
	AuthTime int64    `json:"auth_time"`
	Nonce    string   `json:"nonce,omitempty"`
	ACR      string   `json:"acr,omitempty"`
	AMR      []string `json:"amr"`
	AZP      string   `json:"azp,omitempty"`
	GrantID  string   `json:"sid,omitempty"`
	// PreferredUsername is the pseudonymous name of scope profile (PreferredUsername).
	PreferredUsername string `json:"preferred_username,omitempty"`
}

// RefreshClaims are the claims of a refresh token. Only palmgate reads them
// (its refresh and introspection endpoints); they are exported for the bench,
// whose baseline signs the same claims.
type RefreshClaims struct {
	jwt.RegisteredClaims
	ClientID string `json:"client_id"`
	GrantID  string `json:"sid"`
}

// AppendClaims appends the claims' JSON (keys.ClaimsAppender): what json.Marshal
// writes, by hand when keys.ClaimsJSON can.
func (c IDClaims) AppendClaims(b []byte) ([]byte, error) {
	o := keys.NewClaimsJSON(b)
	o.Registered(&c.RegisteredClaims)
	o.Int("auth_time", c.AuthTime, false)
	o.String("nonce", c.Nonce, true)
	o.String("acr", c.ACR, true)
	o.Strings("amr", c.AMR, false)
	o.String("azp", c.AZP, true)
	o.String("sid", c.GrantID, true)
	o.String("preferred_username", c.PreferredUsername, true)
	return o.End(func() any { return c })
}

// AppendClaims appends the claims' JSON (keys.ClaimsAppender).
func (c RefreshClaims) AppendClaims(b []byte) ([]byte, error) {
	o := keys.NewClaimsJSON(b)
	o.Registered(&c.RegisteredClaims)
	o.String("client_id", c.ClientID, false)
	o.String("sid", c.GrantID, false)
	return o.End(func() any { return c })
}

func joinScopes(scopes []string) string { return strings.Join(scopes, " ") }

func unixOrZero(d *jwt.NumericDate) int64 {
	if d == nil {
		return 0
	}
	return d.Unix()
}

func randomToken(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating random token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// ExchangeCode redeems an authorization code for tokens (RFC 6749 4.1.3, RFC 7636).
// The client must be authenticated already. A code works once: a second use by its
// client revokes the grant the first one started; another client's use revokes nothing.
// resources are the request's `resource` parameters (RFC 8707): none, or the one the
// authorization request was granted.
func (s *Service) ExchangeCode(ctx context.Context, clientID, code, redirectURI, verifier string, resources ...string) (*TokenResponse, error) {
	c, err := s.clients.trustedCaller(clientID)
	if err != nil {
		return nil, err
	}
	return s.exchangeCode(ctx, c, code, redirectURI, verifier, resources...)
}

// exchangeCode is ExchangeCode for the client of a token request, which it
// authenticates (caller).
func (s *Service) exchangeCode(ctx context.Context, c *caller, code, redirectURI, verifier string, resources ...string) (*TokenResponse, error) {
	r, err := s.redeemCode(ctx, c, code, redirectURI, verifier, resources, true)
	if err != nil {
		return nil, err
	}
	resp, err := r.tokens.answer()
	if err == nil {
		s.clients.touch(ctx, r.client, s.refreshTTL)
		s.events.Emit(ctx, event.Event{Kind: event.TokenIssued, Outcome: event.AuthorizationCode, ClientID: c.id, HumanID: r.humanID})
	}
	return resp, err
}

// redemption is what the transaction of a code's redemption decided.
type redemption struct {
	client  *client
	humanID string
	// tokens are being signed (signahead.go); nil when none were asked for.
	tokens *signing
}

// redeemCode uses up a code of client c: every check of the token endpoint
// (binding, expiry, redirect URI, PKCE, resource) and one synced commit of its
// use and the grant. With tokens, that transaction starts signing the grant's
// tokens; RedeemFirstParty, which answers none, signs nothing.
func (s *Service) redeemCode(ctx context.Context, c *caller, code, redirectURI, verifier string, resources []string, tokens bool) (*redemption, error) {
	if code == "" {
		return nil, c.refuse(ctx, oauthError(ErrInvalidRequest, "code is required"))
	}
	if redirectURI == "" {
		return nil, c.refuse(ctx, oauthError(ErrInvalidRequest, "redirect_uri is required"))
	}
	if verifier != "" && !pkceString.MatchString(verifier) {
		return nil, c.refuse(ctx, oauthError(ErrInvalidRequest, "code_verifier must be 43 to 128 unreserved characters"))
	}
	clientID := c.id
	newGrantID, refreshJTI := uuid.NewString(), uuid.NewString()
	var cl *client
	var rec codeRecord
	var g *grant
	var reused bool
	var revoked revocation
	var ahead *signing
	err := s.store.Update(ctx, func(txn storage.Txn) error {
		reused, rec, revoked, ahead = false, codeRecord{}, revocation{}, nil // fn may run again: nothing of a run before
		if err := c.prefetch(txn, codeKey(code)); err != nil {
			return err
		}
		var err error
		if cl, err = c.in(txn); err != nil {
			return err
		}
		b, err := txn.Get(codeKey(code))
		if errors.Is(err, storage.ErrNotFound) {
			return oauthError(ErrInvalidGrant, "unknown or expired code")
		}
		if err != nil {
			return err
		}
		if rec, err = decodeCode(b); err != nil {
			return fmt.Errorf("decoding code: %w", err)
		}
		grantID := newGrantID // a code of an earlier release plans none
		if rec.PlannedGrant != "" {
			grantID = rec.PlannedGrant
		}
		if !s.now().Before(rec.ExpiresAt) {
			return oauthError(ErrInvalidGrant, "unknown or expired code")
		}
		// The client binding comes first: a code presented by another client is
		// refused and revokes nothing, or any client could revoke any grant.
		if rec.ClientID != clientID {
			return oauthError(ErrInvalidGrant, "the code was issued to another client")
		}
		if rec.GrantID != "" {
			reused = true
			revoked, err = s.revokeGrant(txn, rec.GrantID)
			return err
		}
		if rec.RedirectURI != redirectURI {
			return oauthError(ErrInvalidGrant, "redirect_uri differs from the authorization request's")
		}
		if !cl.allowsRedirect(rec.RedirectURI) { // removed since the code was issued (redirect_still.go)
			return oauthError(ErrInvalidGrant, "redirect_uri is no longer registered for this client")
		}
		if cl.public && rec.CodeChallenge == "" { // a code issued before the client became public
			return oauthError(ErrInvalidGrant, "a public client's code must be bound to a PKCE code_challenge")
		}
		if err := checkPKCE(rec.CodeChallenge, verifier); err != nil {
			return err
		}
		// A client without the refresh_token grant is granted no offline_access
		// (a code issued before it lost that grant, too): no refresh token.
		g = &grant{ClientID: clientID, HumanID: rec.HumanID, Scopes: cl.withoutRefresh(rec.Scopes), Resource: rec.Resource, AuthTime: rec.AuthTime,
			Session: rec.Session, KeepUntil: rec.SessionEnd}
		if err := s.checkGranted(cl, g, resources); err != nil {
			return err
		}
		b, err = json.Marshal(rec.used(grantID))
		if err != nil {
			return err
		}
		if err := txn.Set(codeKey(code), b, rec.ExpiresAt.Sub(s.now())+time.Second); err != nil {
			return err
		}
		// The grant and its first refresh token id are written with the code's use:
		// one synced commit per exchange.
		if slices.Contains(g.Scopes, ScopeOfflineAccess) && cl.allowsGrant(grantRefreshToken) {
			g.RefreshJTI = refreshJTI
		}
		if err := s.putGrant(txn, grantID, g, s.grantTTL(g)); err != nil {
			return err
		}
		if !tokens {
			return nil
		}
		// The tokens are signed while the commit is written; they are answered
		// only if this run of fn is the one committed (signahead.go).
		var refreshExp time.Time
		if g.RefreshJTI != "" {
			refreshExp = g.ExpiresAt
		}
		ahead = s.signAhead(cl, grantID, clientID, rec.HumanID, g.Scopes, g.Resource, rec.AuthTime, rec.Nonce, g.RefreshJTI, refreshExp)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if reused {
		s.committed(revoked)
		s.notifyEnded(ctx, revoked)
		s.events.Emit(ctx, event.Event{Kind: event.CodeReused, Outcome: event.Revoked, ClientID: clientID, HumanID: rec.HumanID})
		return nil, oauthError(ErrInvalidGrant, "the code was already used; the tokens issued from it are revoked")
	}
	return &redemption{client: cl, humanID: rec.HumanID, tokens: ahead}, nil
}

func checkPKCE(challenge, verifier string) error {
	switch {
	case challenge == "" && verifier == "":
		return nil
	case challenge == "":
		return oauthError(ErrInvalidGrant, "code_verifier given, but the authorization request had no code_challenge")
	case verifier == "":
		return oauthError(ErrInvalidGrant, "code_verifier is required")
	}
	sum := sha256.Sum256([]byte(verifier))
	if subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(challenge)) != 1 {
		return oauthError(ErrInvalidGrant, "code_verifier does not match the code_challenge")
	}
	return nil
}

func (s *Service) grantTTL(g *grant) time.Duration {
	if slices.Contains(g.Scopes, ScopeOfflineAccess) {
		return s.refreshTTL
	}
	return s.accessTTL + bearer.Leeway
}

func (s *Service) putGrant(txn storage.Txn, id string, g *grant, ttl time.Duration) error {
	if g.ExpiresAt.IsZero() {
		g.ExpiresAt = s.now().Add(ttl)
	}
	b, err := json.Marshal(g)
	if err != nil {
		return err
	}
	return txn.Set(grantKey(id), b, max(g.ExpiresAt.Sub(s.now())+bearer.Leeway, g.KeepUntil.Sub(s.now()), time.Second))
}

func getGrant(txn storage.Txn, id string) (*grant, error) {
	return records.Get[grant](txn, grantKey(id), errGrantGone(), "grant "+id)
}

// readGrant is getGrant on its own, outside a transaction.
func readGrant(ctx context.Context, store storage.Store, id string) (*grant, error) {
	return records.Read[grant](ctx, store, grantKey(id), errGrantGone(), "grant "+id)
}

func errGrantGone() error {
	return oauthError(ErrInvalidGrant, "the grant has expired or was revoked")
}

// Refresh rotates a refresh token (RFC 6749 6): the old one stops working and a new
// one, a new access token and a new ID token are issued. A rotated token used again
// revokes its whole family. The new access token keeps the grant's audience; a
// `resource` (resources) may only name the one granted.
func (s *Service) Refresh(ctx context.Context, clientID, refreshToken, scope string, resources ...string) (*TokenResponse, error) {
	c, err := s.clients.trustedCaller(clientID)
	if err != nil {
		return nil, err
	}
	return s.refresh(ctx, c, refreshToken, scope, resources...)
}

// refresh is Refresh for the client of a token request, which it authenticates
// (caller).
func (s *Service) refresh(ctx context.Context, c *caller, refreshToken, scope string, resources ...string) (*TokenResponse, error) {
	if refreshToken == "" {
		return nil, c.refuse(ctx, oauthError(ErrInvalidRequest, "refresh_token is required"))
	}
	clientID := c.id
	var claims RefreshClaims
	_, err := s.refreshParser.ParseWithClaims(refreshToken, &claims, s.keyFunc(ctx, TypeRefreshToken))
	if unavailableKey(err) {
		return nil, err
	}
	if err != nil || claims.ID == "" || claims.GrantID == "" {
		return nil, c.refuse(ctx, oauthError(ErrInvalidGrant, "invalid refresh token"))
	}
	if claims.ClientID != clientID {
		return nil, c.refuse(ctx, oauthError(ErrInvalidGrant, "the refresh token was issued to another client"))
	}
	// Parse the asked scopes before the transaction: a refused request must leave the
	// refresh token usable (rotating it first would make the retry look like reuse).
	// A narrowed scope may drop openid (RFC 6749 6): an access token for an API,
	// without an ID token.
	var asked []string
	if scope != "" {
		if asked, err = parseScopeList(scope); err != nil {
			return nil, c.refuse(ctx, err)
		}
		if len(asked) == 0 {
			return nil, c.refuse(ctx, oauthError(ErrInvalidScope, "scope is empty"))
		}
	}
	newJTI := uuid.NewString()
	var cl *client
	var g *grant
	var reused bool
	var revoked revocation
	var ahead *signing
	err = s.store.Update(ctx, func(txn storage.Txn) error {
		reused, revoked, ahead = false, revocation{}, nil
		if err := c.prefetch(txn, grantKey(claims.GrantID)); err != nil {
			return err
		}
		var err error
		if cl, err = c.in(txn); err != nil {
			return err
		}
		if g, err = getGrant(txn, claims.GrantID); err != nil {
			return err
		}
		if g.Revoked {
			return oauthError(ErrInvalidGrant, "the refresh token was revoked")
		}
		if subtle.ConstantTimeCompare([]byte(g.RefreshJTI), []byte(claims.ID)) != 1 {
			reused = true
			revoked, err = s.revokeGrant(txn, claims.GrantID)
			return err
		}
		for _, sc := range asked {
			if !slices.Contains(g.Scopes, sc) {
				return oauthError(ErrInvalidScope, "scope %q was not granted", sc)
			}
		}
		if err := s.checkGranted(cl, g, resources); err != nil {
			return err
		}
		g.RefreshJTI = newJTI
		if err := s.putGrant(txn, claims.GrantID, g, 0); err != nil {
			return err
		}
		scopes := g.Scopes
		if asked != nil {
			scopes = asked
		}
		ahead = s.signAhead(cl, claims.GrantID, clientID, g.HumanID, scopes, g.Resource, g.AuthTime, "", newJTI, g.ExpiresAt)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if reused {
		s.committed(revoked)
		s.notifyEnded(ctx, revoked)
		s.events.Emit(ctx, event.Event{Kind: event.RefreshReused, Outcome: event.Revoked, ClientID: clientID, HumanID: g.HumanID})
		return nil, oauthError(ErrInvalidGrant, "the refresh token was already used; its family is revoked")
	}
	resp, err := ahead.answer()
	if err == nil {
		s.clients.touch(ctx, cl, s.refreshTTL)
		s.events.Emit(ctx, event.Event{Kind: event.TokenIssued, Outcome: event.RefreshToken, ClientID: clientID, HumanID: g.HumanID})
	}
	return resp, err
}

// sign makes the access token, the ID token and (with refreshJTI) the refresh token,
// and returns the access token's claims for the bearer cache (signahead.go). The
// access token's aud is the grant's resource, or the client's choice
// (accessAudience).
func (s *Service) sign(cl *client, grantID, clientID, humanID string, scopes []string, resource string, authTime time.Time, nonce, refreshJTI string, refreshExp time.Time) (*TokenResponse, *AccessClaims, error) {
	now := s.now()
	sub := PairwiseSubject(s.pairwiseSecret, cl.sector, humanID)
	scope := joinScopes(scopes)
	exp := now.Add(s.accessTTL)
	accessClaims := &AccessClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: s.issuer, Subject: sub, Audience: s.accessAudience(cl, resource),
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(exp), ID: uuid.NewString(),
		},
		ClientID: clientID, Scope: scope, AuthTime: authTime.Unix(), GrantID: grantID,
	}
	access, err := s.keys.Sign(keys.ES256, TypeAccessToken, accessClaims)
	if err != nil {
		return nil, nil, fmt.Errorf("signing access token: %w", err)
	}
	resp := &TokenResponse{
		AccessToken: access, TokenType: "Bearer", ExpiresIn: int64(s.accessTTL / time.Second),
		Scope: scope,
	}
	// An ID token only for openid: a refresh narrowed to API scopes gets none.
	if slices.Contains(scopes, ScopeOpenID) {
		// The client's algorithm; RS256 for one without (a dynamic client has no
		// option for it).
		resp.IDToken, err = s.keys.Sign(orDefault(cl.idTokenAlg, keys.RS256), TypeIDToken, IDClaims{
			RegisteredClaims: jwt.RegisteredClaims{
				Issuer: s.issuer, Subject: sub, Audience: jwt.ClaimStrings{clientID},
				IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(exp),
			},
			AuthTime: authTime.Unix(), Nonce: nonce, ACR: ACRPalm, AMR: []string{AMRPalm}, AZP: clientID, GrantID: grantID,
			PreferredUsername: ProfileClaims(sub, scopes)["preferred_username"],
		})
		if err != nil {
			return nil, nil, fmt.Errorf("signing ID token: %w", err)
		}
	}
	if refreshJTI != "" {
		resp.RefreshToken, err = s.keys.Sign(keys.ES256, TypeRefreshToken, RefreshClaims{
			RegisteredClaims: jwt.RegisteredClaims{
				Issuer: s.issuer, Subject: sub, Audience: jwt.ClaimStrings{s.issuer},
				IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(refreshExp), ID: refreshJTI,
			},
			ClientID: clientID, GrantID: grantID,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("signing refresh token: %w", err)
		}
		resp.RefreshTokenExpiresIn = int64(refreshExp.Sub(now) / time.Second)
	}
	return resp, accessClaims, nil
}

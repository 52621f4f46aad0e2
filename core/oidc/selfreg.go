package oidc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/storage"
)

// Dynamic client registration (RFC 7591) at {issuer}/register: anyone may register
// a client, so nothing about it is trusted. Such a client is validated as a portal
// client is (validateSpec: its name and redirect URIs), is marked self-registered
// on the consent screen (RegisteredNotice), and is bounded:
//
//   - in number: at most Registration.MaxClients live self-registered clients in
//     all, and Registration.MaxPerNetwork from one client network (palm.Network:
//     an IPv4 /24, an IPv6 /48), counted only while the edge counts addresses (the
//     rate limit on);
//   - in time: one never used (no token issued to it) lapses Registration.Unused
//     (24h) after its registration; each use keeps it for the refresh token
//     lifetime from then (at least as long), so a client whose refresh tokens still
//     work is never deleted under them, and one abandoned goes away.
//
// A registration names only what RFC 7591 needs here: redirect_uris, client_name,
// post_logout_redirect_uris (RP-Initiated Logout 1.0 3.1; see Logout.Confirm),
// token_endpoint_auth_method (none: public; client_secret_basic, the RFC's
// default, or client_secret_post: confidential, with a secret shown once),
// grant_types (authorization_code, with refresh_token and the agents' jwt-bearer
// if it asks for them: its only grants) and response_types (code).
// Other metadata (logo_uri, client_uri, contacts, ...) is ignored, never shown: a
// logo or a link chosen by an anonymous registrant has no place on the consent
// screen.

// Defaults of self-registration.
const (
	DefaultRegistrationMax        = 10000
	DefaultRegistrationPerNetwork = 100
	DefaultRegistrationUnused     = 24 * time.Hour
)

// RegisteredNotice is the words beside the name of a client registered through
// RFC 7591 on the consent screen.
const RegisteredNotice = "registered itself, not by the operator"

// RFC 7591 3.2.2 error codes.
const (
	ErrInvalidRedirectURI    = "invalid_redirect_uri"
	ErrInvalidClientMetadata = "invalid_client_metadata"
)

// RegistrationConfig switches and bounds RFC 7591 registration.
type RegistrationConfig struct {
	// Open turns registration on; off, Register refuses (the edge answers 404).
	Open bool
	// MaxClients bounds the live self-registered clients (-1: no bound);
	// MaxPerNetwork those from one network. 0: the defaults above.
	MaxClients, MaxPerNetwork int
	// Unused is how long a client never used lives. 0: DefaultRegistrationUnused.
	Unused time.Duration
}

// ErrRegistrationOff refuses a registration while registration is off.
var ErrRegistrationOff = &fault.Error{Class: fault.NotFound, Code: ErrNotFound, Message: "dynamic client registration is off"}

// RegistrationRequest is the client metadata of an RFC 7591 request.
type RegistrationRequest struct {
	RedirectURIs            []string `json:"redirect_uris"`
	ClientName              string   `json:"client_name"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	// PostLogoutRedirectURIs (OpenID Connect RP-Initiated Logout 1.0 3.1),
	// validated as redirect_uris are; a logout without id_token_hint does not go
	// there unseen (Logout.Confirm).
	PostLogoutRedirectURIs []string `json:"post_logout_redirect_uris"`
	// BackchannelLogoutURI (OpenID Connect Back-Channel Logout 1.0 2.2): https
	// (CheckBackchannelLogoutURI); its address must be a public one unless the
	// operator allowed private ones (edge/backchannel). Every logout token
	// carries sid, so backchannel_logout_session_required is honoured whatever it
	// says.
	BackchannelLogoutURI             string `json:"backchannel_logout_uri"`
	BackchannelLogoutSessionRequired *bool  `json:"backchannel_logout_session_required"`
}

// Registered is the RFC 7591 3.2.1 answer.
type Registered struct {
	ClientID                string   `json:"client_id"`
	ClientIDIssuedAt        int64    `json:"client_id_issued_at"`
	ClientSecret            string   `json:"client_secret,omitempty"`
	ClientSecretExpiresAt   *int64   `json:"client_secret_expires_at,omitempty"`
	ClientName              string   `json:"client_name"`
	RedirectURIs            []string `json:"redirect_uris"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	PostLogoutRedirectURIs  []string `json:"post_logout_redirect_uris,omitempty"`
	// BackchannelLogoutURI and, with it, BackchannelLogoutSessionRequired (true).
	BackchannelLogoutURI             string `json:"backchannel_logout_uri,omitempty"`
	BackchannelLogoutSessionRequired bool   `json:"backchannel_logout_session_required,omitempty"`
}

// RegistrationOpen reports whether RFC 7591 registration is on (discovery's
// registration_endpoint).
func (s *Service) RegistrationOpen() bool { return s.clients.reg.Open }

// Register registers a client (RFC 7591) for a request from address (the edge's
// count of the client's address, "" when it counts none).
func (s *Service) Register(ctx context.Context, req RegistrationRequest, address string) (*Registered, error) {
	return s.clients.register(ctx, req, address, s.refreshTTL)
}

func regError(code, format string, args ...any) error {
	return &fault.Error{Class: fault.Invalid, Code: code, Message: fmt.Sprintf(format, args...)}
}

func (r *Clients) register(ctx context.Context, req RegistrationRequest, address string, keep time.Duration) (*Registered, error) {
	if !r.reg.Open {
		return nil, ErrRegistrationOff
	}
	method := orDefault(req.TokenEndpointAuthMethod, "client_secret_basic") // RFC 7591 2
	if !slices.Contains(publicAuthMethods, method) {
		return nil, regError(ErrInvalidClientMetadata, "token_endpoint_auth_method: none, client_secret_basic or client_secret_post")
	}
	grants := req.GrantTypes
	if len(grants) == 0 {
		grants = []string{"authorization_code"}
	}
	for _, g := range grants {
		if !slices.Contains(GrantTypes, g) {
			return nil, regError(ErrInvalidClientMetadata, "grant_types: authorization_code, refresh_token and %s only, got %.50q", GrantTypeJWTBearer, g)
		}
	}
	if !slices.Contains(grants, "authorization_code") {
		return nil, regError(ErrInvalidClientMetadata, "grant_types must include authorization_code")
	}
	responses := req.ResponseTypes
	if len(responses) == 0 {
		responses = []string{"code"}
	}
	if len(responses) != 1 || responses[0] != "code" {
		return nil, regError(ErrInvalidClientMetadata, "response_types: code only")
	}
	if len(req.RedirectURIs) == 0 {
		return nil, regError(ErrInvalidRedirectURI, "redirect_uris: at least one is required")
	}
	for _, u := range req.RedirectURIs {
		// https, or http on a loopback host (RFC 8252) even in dev mode: an
		// anonymous client gets no plain-http redirect elsewhere; a public one
		// (a native app) a private-use scheme besides (redirect_private.go).
		if err := CheckClientRedirectURI("redirect_uri", strings.TrimSpace(u), false, method == TokenAuthMethodNone); err != nil {
			return nil, regError(ErrInvalidRedirectURI, "%s", err.Error())
		}
	}
	for _, u := range req.PostLogoutRedirectURIs { // as redirect_uris
		if err := CheckClientRedirectURI("post_logout_redirect_uri", strings.TrimSpace(u), false, method == TokenAuthMethodNone); err != nil {
			return nil, regError(ErrInvalidClientMetadata, "%s", err.Error())
		}
	}
	uris := ClientSpec{RedirectURIs: req.RedirectURIs}
	if err := r.validateSpec(&uris); err != nil {
		return nil, regError(ErrInvalidRedirectURI, "%s", err.Error())
	}
	var logouts []string
	if len(req.PostLogoutRedirectURIs) > 0 {
		l := ClientSpec{PostLogoutRedirectURIs: req.PostLogoutRedirectURIs}
		if err := r.validateSpec(&l); err != nil {
			return nil, regError(ErrInvalidClientMetadata, "%s", err.Error())
		}
		logouts = l.PostLogoutRedirectURIs
	}
	backchannel := strings.TrimSpace(req.BackchannelLogoutURI)
	if backchannel != "" {
		if err := CheckBackchannelLogoutURI(backchannel, false); err != nil {
			return nil, regError(ErrInvalidClientMetadata, "%s", err.Error())
		}
	}
	name := req.ClientName
	if name == "" {
		u, _ := url.Parse(uris.RedirectURIs[0])
		if name = u.Hostname(); name == "" {
			name = u.Scheme // a private-use scheme's com.example.app:/cb has no host
		}
	}
	spec := ClientSpec{Name: &name, RedirectURIs: uris.RedirectURIs, Public: method == TokenAuthMethodNone, PostLogoutRedirectURIs: logouts,
		BackchannelLogoutURI: &backchannel}
	if err := r.validateSpec(&spec); err != nil {
		return nil, regError(ErrInvalidClientMetadata, "client_name: %s", err.Error())
	}
	now := r.now().UTC()
	network := ""
	if address != "" {
		network = palm.Network(address)
	}
	sr := &selfReg{network: network, expiresAt: now.Add(r.unused()), grantTypes: slices.Compact(slices.Sorted(slices.Values(grants)))}
	if method != TokenAuthMethodNone {
		sr.authMethod = method
	}
	info, secret, err := r.create(ctx, spec, sr)
	if err != nil {
		return nil, err
	}
	out := &Registered{
		ClientID: info.ID, ClientIDIssuedAt: info.CreatedAt.Unix(), ClientName: info.Name,
		RedirectURIs: info.RedirectURIs, TokenEndpointAuthMethod: method, GrantTypes: grants, ResponseTypes: responses,
		PostLogoutRedirectURIs: logouts,
		BackchannelLogoutURI:   backchannel, BackchannelLogoutSessionRequired: backchannel != "",
	}
	if secret != "" {
		// The secret works as long as the registration: it lapses at ExpiresAt
		// unless a token is issued to the client first, each of which keeps it
		// refresh_token_ttl from then. 0 ("never", RFC 7591 3.2.1) would be false
		// of an unused one; RFC 7592, which could tell the later date, is not
		// served, so a client that goes by this date registers again after it.
		lapse := info.ExpiresAt.Unix()
		out.ClientSecret, out.ClientSecretExpiresAt = secret, &lapse
	}
	return out, nil
}

func (r *Clients) unused() time.Duration {
	if r.reg.Unused > 0 {
		return r.reg.Unused
	}
	return DefaultRegistrationUnused
}

// selfReg is what Create does besides for an RFC 7591 registration.
type selfReg struct {
	network   string
	expiresAt time.Time
	// grantTypes are the registered grant_types, the only ones the token
	// endpoint serves it (RFC 7591 2, as Hydra): without refresh_token it gets no
	// refresh token.
	grantTypes []string
	// authMethod is a confidential client's registered
	// token_endpoint_auth_method, the only one it may use (RFC 7591 2, as
	// Hydra); "" for a public one (none: it has no secret to send).
	authMethod string
}

// selfRegMarkKey is read and written by every registration, so that concurrent
// ones conflict (and retry) and cannot both pass the caps.
func (r *Clients) checkRegistrationCaps(txn storage.Txn, sr *selfReg, id string) error {
	if _, err := txn.Get(selfRegMarkKey()); err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	if err := txn.Set(selfRegMarkKey(), []byte(id), 0); err != nil {
		return err
	}
	now := r.now()
	total, inNetwork := 0, 0
	prefix := selfRegPrefix()
	err := txn.Iterate(prefix, func(k, v []byte) (bool, error) {
		if len(v) == 8 && now.UnixMilli() >= int64(binary.BigEndian.Uint64(v)) {
			return true, nil // lapsed, not yet collected
		}
		total++
		if sr.network != "" && len(k) > len(prefix)+len(sr.network) && string(k[len(prefix):len(prefix)+len(sr.network)+1]) == sr.network+"/" {
			inNetwork++
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	if maxAll := orDefaultInt(r.reg.MaxClients, DefaultRegistrationMax); maxAll >= 0 && total >= maxAll {
		return &fault.Error{Class: fault.Unavailable, Code: TemporarilyUnavailable, RetryAfter: time.Hour,
			Message: "too many self-registered clients; retry later"}
	}
	if maxNet := orDefaultInt(r.reg.MaxPerNetwork, DefaultRegistrationPerNetwork); sr.network != "" && maxNet >= 0 && inNetwork >= maxNet {
		return &fault.Error{Class: fault.TooMany, Code: TemporarilyUnavailable, RetryAfter: time.Hour,
			Message: "too many clients registered from this network; reuse one, or retry later"}
	}
	return nil
}

func orDefaultInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// putSelfRegistered checks the caps and writes the index entry of rec, a client
// self-registered as sr says; nothing when sr is nil (any other client).
func (r *Clients) putSelfRegistered(txn storage.Txn, sr *selfReg, rec *clientRecord, ttl time.Duration) error {
	if sr == nil {
		return nil
	}
	if err := r.checkRegistrationCaps(txn, sr, rec.ID); err != nil {
		return err
	}
	return putSelfReg(txn, rec, ttl)
}

// notice is the words beside a dynamic client's name on the consent screen: a
// self-registered one's (RFC 7591), a portal one's, or none.
func (rec *clientRecord) notice() string {
	switch {
	case rec.SelfRegistered:
		return RegisteredNotice
	case rec.Owner != "":
		return palm.SelfRegisteredNotice
	}
	return ""
}

// putSelfReg writes the index entry of a self-registered client: its expiry (ms),
// with a store TTL a little past it.
func putSelfReg(txn storage.Txn, rec *clientRecord, ttl time.Duration) error {
	v := make([]byte, 8)
	binary.BigEndian.PutUint64(v, uint64(rec.ExpiresAt.UnixMilli()))
	return txn.Set(selfRegKey(rec.Network, rec.ID), v, ttl)
}

// recordTTL is the store TTL of a record that lapses at exp (0: none): an hour
// past it, so that the store collects what lookup already ignores.
func (r *Clients) recordTTL(exp time.Time) time.Duration {
	if exp.IsZero() {
		return 0
	}
	return max(exp.Sub(r.now()), 0) + time.Hour
}

// touch keeps a self-registered client that was just used (a token issued to it)
// for keep (at least Unused) from now. It writes at most once per tenth of that
// period; a failure is ignored (the next use retries). It runs after the grant
// committed, outside it.
func (r *Clients) touch(ctx context.Context, cl *client, keep time.Duration) {
	if cl == nil || cl.expiresAt.IsZero() {
		return
	}
	keep = max(keep, r.unused())
	now := r.now().UTC()
	if cl.expiresAt.After(now.Add(keep - keep/10)) {
		return
	}
	_ = r.store.Update(ctx, func(txn storage.Txn) error {
		rec, err := readClient(txn, cl.id)
		if err != nil {
			return err
		}
		rec.ExpiresAt = now.Add(keep)
		ttl := r.recordTTL(rec.ExpiresAt)
		if err := putSelfReg(txn, rec, ttl); err != nil {
			return err
		}
		for _, o := range rec.origins() {
			if err := txn.Set(originKey(o, rec.ID), nil, ttl); err != nil {
				return err
			}
		}
		return r.writeClient(txn, rec, ttl)
	})
}

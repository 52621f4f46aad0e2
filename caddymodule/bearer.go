package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/edge"
)

func init() {
	caddy.RegisterModule(Bearer{})
	httpcaddyfile.RegisterHandlerDirective("palmgate_bearer", parseBearer)
}

// Defaults of the bearer middleware in remote mode.
const (
	DefaultRefetchInterval = 30 * time.Second
	DefaultIssuerTimeout   = 5 * time.Second
)

// Bearer admits only requests that carry a valid palmgate access token in
// `Authorization: Bearer`, and tells the upstream who made them: it sets the
// placeholders {http.auth.user.id} (the pairwise sub), {http.auth.user.scope} and
// {http.auth.user.client_id}, and the X-Palmgate-Sub, X-Palmgate-Scope and
// X-Palmgate-Client-Id request headers. Refusals follow RFC 6750: 401 with
// `WWW-Authenticate: Bearer` (error="invalid_token" for a bad token), 403 with
// error="insufficient_scope".
//
// In local mode (no issuer) the palmgate app of the same Caddy verifies tokens, and
// revoked grants are refused. In remote mode the issuer's keys are fetched by OIDC
// discovery and cached.
type Bearer struct {
	// Issuer is the OIDC issuer of a remote palmgate, such as
	// https://id.example.com/oauth2. Empty: the palmgate app of this Caddy.
	Issuer string `json:"issuer,omitempty"`

	// Scopes that every admitted token must have been granted (all of them).
	Scopes []string `json:"scopes,omitempty"`

	// Audience, when set, must be in the token's `aud`: tokens issued for another
	// resource (RFC 8707 `resource`) are refused with 401 invalid_token. A token
	// asked without `resource` has the issuer's base URL as its aud.
	Audience string `json:"audience,omitempty"`

	// Resource is this site's resource identifier (RFC 9728), such as
	// https://mcp.example.com/mcp: the 401's resource_metadata names its
	// document, tokens must carry it in aud (it is the audience), and, with the
	// local issuer, clients without a `resources` list may ask tokens for it.
	// Default: the request's origin, with no audience check (see Audience).
	Resource string `json:"resource,omitempty"`

	// StripToken removes the Authorization header before the request goes on.
	StripToken bool `json:"strip_token,omitempty"`

	// Realm is the realm of WWW-Authenticate challenges. Default: palmgate.
	Realm string `json:"realm,omitempty"`

	// RefetchInterval bounds how often an unknown key id refetches a remote issuer's
	// keys. Default: 30s.
	RefetchInterval caddy.Duration `json:"refetch_interval,omitempty"`

	// Timeout bounds each request to a remote issuer. Default: 5s.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	// Leeway is how long past its `exp` a remote issuer's token is still admitted,
	// for the clock difference between this machine and the issuer's. Only in remote
	// mode: in local mode the token is checked on the clock that signed it, with
	// none. Default (unset): 30s; 0 allows none.
	Leeway *caddy.Duration `json:"leeway,omitempty"`

	// CacheSize bounds how many verified tokens are remembered (by hash, until they
	// expire), so that a repeated token costs no signature check. Default: 10000;
	// -1 disables the cache.
	CacheSize int `json:"cache_size,omitempty"`

	// Agents says whether tokens of agents acting for their humans (an `act`
	// claim) are admitted: "allow", "only" (agents alone), or "deny" (the
	// default: a site never starts admitting agents by surprise). Refused tokens
	// get 403 insufficient_scope. {http.auth.user.agent_id} and the
	// X-Palmgate-Agent-Id header name the agent of an admitted one.
	Agents string `json:"agents,omitempty"`

	verifier *bearer.Verifier
	logger   *zap.Logger

	authServer string                   // the issuer its metadata names
	metadata   *bearer.ResourceMetadata // of Resource, when set (bearer_metadata.go)
}

// CaddyModule returns the Caddy module information.
func (Bearer) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.palmgate_bearer",
		New: func() caddy.Module { return new(Bearer) },
	}
}

// Provision builds the token verifier.
func (b *Bearer) Provision(ctx caddy.Context) error {
	b.logger = ctx.Logger()
	if err := registerMetrics(ctx); err != nil {
		return fmt.Errorf("palmgate_bearer: registering metrics: %w", err)
	}
	if b.Realm == "" {
		b.Realm = edge.Realm
	}
	if err := b.validAgentsMode(); err != nil {
		return err
	}
	if b.Issuer == "" {
		if b.Leeway != nil {
			return errors.New("palmgate_bearer leeway: only with an issuer (remote mode); the local issuer's tokens expire exactly")
		}
		app, err := ctx.AppIfConfigured("palmgate")
		if errors.Is(err, caddy.ErrNotConfigured) {
			return errors.New("palmgate_bearer: without an issuer it needs the palmgate global option in the same Caddy")
		}
		if err != nil {
			return err
		}
		pg := app.(*App)
		if err := b.provisionResource(pg.OIDC().Issuer()); err != nil {
			return err
		}
		if b.metadata != nil {
			pg.ProtectResource(*b.metadata)
		}
		if b.CacheSize == 0 {
			// One cache for the whole issuer: userinfo, /oauth2/check and every
			// route, primed with the tokens this instance issues.
			b.verifier = pg.OIDC().AccessVerifier()
			return nil
		}
		b.verifier = bearer.NewVerifier(bearer.Config{
			Issuer: pg.OIDC().Issuer(), Algorithm: keys.ES256, Keys: pg.Keys(),
			Revocations: pg.OIDC().Revocations(), CacheSize: b.CacheSize,
		})
		return nil
	}
	b.Issuer = strings.TrimSuffix(b.Issuer, "/")
	if err := validateRemoteIssuer(b.Issuer); err != nil {
		return err
	}
	if err := b.provisionResource(b.Issuer); err != nil {
		return err
	}
	defaultDuration(&b.RefetchInterval, DefaultRefetchInterval)
	defaultDuration(&b.Timeout, DefaultIssuerTimeout)
	leeway := bearer.Leeway
	if b.Leeway != nil {
		leeway = time.Duration(*b.Leeway)
	}
	remote := bearer.NewRemoteKeys(b.Issuer, &http.Client{Timeout: time.Duration(b.Timeout)}, time.Duration(b.RefetchInterval), nil)
	b.verifier = bearer.NewVerifier(bearer.Config{Issuer: b.Issuer, Algorithm: keys.ES256, Keys: remote, CacheSize: b.CacheSize, Leeway: leeway})
	go b.prefetch(ctx, remote)
	return nil
}

// prefetch loads the remote issuer's keys, and says so when it cannot reach it. A
// config discarded meanwhile (caddy validate, a failed reload) cancels ctx: that
// prefetch reports nothing, since nothing will serve with it.
func (b *Bearer) prefetch(ctx context.Context, remote *bearer.RemoteKeys) {
	err := remote.Prefetch(ctx)
	if err == nil || ctx.Err() != nil {
		return
	}
	b.logger.Warn("palmgate_bearer: issuer not reached, its keys are not loaded; requests bearing its tokens are answered 503 until it is (tried again on demand)",
		zap.String("issuer", b.Issuer), zap.Error(err))
}

func validateRemoteIssuer(issuer string) error {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && isLoopback(u.Hostname()))) {
		return fmt.Errorf("palmgate_bearer issuer: %q must be an https URL (http only on loopback)", issuer)
	}
	return nil
}

// ServeHTTP admits requests with a valid token and refuses the others: it sets the
// RFC 6750 challenge (and Retry-After on a 503) and returns the refusal as a
// caddyhttp.Error, as caddyauth does, so that handle_errors can shape the answer
// and the access log records it.
func (b *Bearer) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if b.answerMetadata(w, r) {
		return nil
	}
	// Before the decision: a refused request goes on to handle_errors, which may
	// proxy it to the application, and must not carry the client's copies.
	edge.DeleteIdentityHeaders(r.Header)
	claims, err := b.check(r)
	count(event.Event{Kind: event.Bearer, Outcome: bearer.Decision(err)})
	if err != nil {
		status := edge.SetChallenge(w.Header(), b.Realm, err)
		b.challengeMetadata(w.Header(), r, status)
		if status >= 500 {
			b.logger.Warn("palmgate_bearer: cannot verify tokens", zap.Error(edge.Cause(err)))
		}
		return caddyhttp.Error(status, refusalText(err))
	}
	if b.StripToken {
		r.Header.Del("Authorization")
	}
	edge.PutIdentityHeaders(r.Header, claims) // the copies went before the decision
	repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	repl.Set("http.auth.user.id", claims.Subject)
	repl.Set("http.auth.user.scope", claims.Scope)
	repl.Set("http.auth.user.client_id", claims.ClientID)
	setAgentPlaceholder(repl, claims)
	return next.ServeHTTP(w, r)
}

// refusalText is err with the text handle_errors' {http.error.message} and the
// error log have always shown: "code: description" for a refusal, "description:
// cause" when tokens cannot be checked. errors.Is and errors.As still see err.
func refusalText(err error) error {
	f, ok := fault.As(err)
	switch {
	case !ok:
		return err
	case f.Class == fault.Unavailable:
		return fmt.Errorf("%w: %v", err, edge.Cause(err))
	}
	return fmt.Errorf("%s: %w", f.Code, err)
}

// check verifies the token (every check of the one access-token verifier), then
// its audience, then the scopes.
func (b *Bearer) check(r *http.Request) (*bearer.Claims, error) {
	claims, err := edge.CheckBearer(r, b.verifier, b.Audience, b.Scopes)
	if err == nil {
		err = b.agentsMode().Admit(claims)
	}
	return claims, err
}

// UnmarshalCaddyfile sets up the middleware:
//
//	palmgate_bearer {
//		scope <scope> [<scope>...]
//		audience <uri>
//		resource <url>
//		issuer <url>
//		strip_token
//		realm <realm>
//		refetch_interval <duration>
//		timeout <duration>
//		leeway <duration>
//		cache_size <tokens>
//		agents allow|deny|only
//	}
func (b *Bearer) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch option := d.Val(); option {
		case "scope":
			scopes := d.RemainingArgs()
			if len(scopes) == 0 {
				return d.Errf("palmgate_bearer scope: needs at least one scope")
			}
			b.Scopes = append(b.Scopes, scopes...)
		case "issuer":
			if err := singleArg(d, &b.Issuer); err != nil {
				return err
			}
		case "audience":
			if err := singleArg(d, &b.Audience); err != nil {
				return err
			}
			if !oidc.ValidResource(b.Audience) {
				return d.Errf("palmgate_bearer audience: %q must be an absolute URI without a fragment", b.Audience)
			}
		case "resource":
			if err := singleArg(d, &b.Resource); err != nil {
				return err
			}
			if _, ok := bearer.MetadataURL(b.Resource); !ok || !oidc.ValidResource(b.Resource) {
				return d.Errf("palmgate_bearer resource: %q must be an http(s) URL without query or fragment", b.Resource)
			}
		case "strip_token":
			if d.NextArg() {
				return d.Errf("palmgate_bearer strip_token: takes no argument")
			}
			b.StripToken = true
		case "realm":
			if err := singleArg(d, &b.Realm); err != nil {
				return err
			}
			if strings.ContainsAny(b.Realm, `"\`) {
				return d.Errf("palmgate_bearer realm: must not contain quotes or backslashes")
			}
		case "refetch_interval":
			if err := parsePositiveDuration(d, &b.RefetchInterval); err != nil {
				return err
			}
		case "timeout":
			if err := parsePositiveDuration(d, &b.Timeout); err != nil {
				return err
			}
		case "leeway":
			b.Leeway = new(caddy.Duration)
			if err := parseDuration(d, b.Leeway); err != nil {
				return err
			}
			if *b.Leeway < 0 || time.Duration(*b.Leeway) > 5*time.Minute {
				return d.Errf("palmgate_bearer leeway: must be between 0 and 5m")
			}
		case "cache_size":
			var n string
			if err := singleArg(d, &n); err != nil {
				return err
			}
			size, err := strconv.Atoi(n)
			if err != nil || size < -1 {
				return d.Errf("palmgate_bearer cache_size: %q is not a number of tokens (or -1 for none)", n)
			}
			b.CacheSize = size
		case "agents":
			if err := parseAgentsOption(d, &b.Agents); err != nil {
				return err
			}
		default:
			return d.Errf("palmgate_bearer: unknown option %q", option)
		}
	}
	return nil
}

func parseBearer(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	var b Bearer
	err := b.UnmarshalCaddyfile(h.Dispenser)
	return &b, err
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Bearer)(nil)
	_ caddyhttp.MiddlewareHandler = (*Bearer)(nil)
	_ caddyfile.Unmarshaler       = (*Bearer)(nil)
)

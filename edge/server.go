// Package edge is palmgate's HTTP edge, in plain net/http: the routes of /oauth2
// and /v1, the login and registration pages, the browser binding cookies and the
// rate limit. It is built from the core services and translates HTTP to their
// calls, and their answers and faults (core/fault) back to HTTP, through one
// mapper per error dialect: the /v1 JSON body (v1Error), OAuth's JSON and
// redirects (writeOAuthError), the RFC 6750 challenge (SetChallenge) and the
// pages (pageOf, errorpage.go: what a browser gets where an API caller gets
// JSON); Status maps a fault's class to its status for all.
// It knows nothing of Caddy (whose module builds it and passes it the client
// address Caddy determined).
package edge

import (
	"net/http"
	"path"
	"sort"
	"strings"

	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/agent"
	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/internal/brand"
	"github.com/palmgate/palmgate/storage"
)

// Config builds a Server from the core services.
type Config struct {
	// Issuer is the public base URL of the service, with no path.
	Issuer string
	Palm   *palm.Service
	Agents *agent.Service
	OIDC   *oidc.Service
	Keys   *keys.Set
	// RateLimit bounds unauthenticated writes per client address.
	RateLimit RateLimit
	// ClientIP returns the client address of a request (Caddy's, which honours
	// trusted proxies); nil means the peer's address (RemoteIP).
	ClientIP func(*http.Request) string
	// Portal is the developer portal (package portal), mounted at /portal; nil
	// means off (404).
	Portal http.Handler
	// Logger logs the failures that are not the client's; nil logs nothing.
	Logger *zap.Logger
	// Store is what /health/ready checks (health.go); nil: never ready.
	Store storage.Store
	// PalmAppURL is where a person gets the palm app (an app store page, say): the
	// page a phone without the app shows for a scan URL links to it (palmapp.go);
	// "" shows a neutral text.
	PalmAppURL string
	// Resources are the resources whose RFC 9728 metadata this server answers
	// (wellknown.go); nil: none.
	Resources *bearer.Resources
	// Brand is the operator's brand on every page (validated by the caller);
	// the zero Brand is palmgate's own.
	Brand brand.Brand
}

// Server serves palmgate's paths: /oauth2/*, /v1/* and the portal's /portal/*.
type Server struct {
	issuer   string
	palm     *palm.Service
	agents   *agent.Service
	oidc     *oidc.Service
	keys     *keys.Set
	limiter  *limiter
	logger   *zap.Logger
	clientIP func(*http.Request) string
	mux      *http.ServeMux
	board    boardEncodings
	portal   http.Handler
	health   health
	appURL   string

	resources *bearer.Resources // RFC 9728 documents served (wellknown.go)
	brand     brand.Brand
}

// New builds the server and its routes.
func New(cfg Config) *Server {
	s := &Server{
		issuer: strings.TrimSuffix(cfg.Issuer, "/"),
		palm:   cfg.Palm, agents: cfg.Agents, oidc: cfg.OIDC, keys: cfg.Keys,
		logger: cfg.Logger, clientIP: cfg.ClientIP, portal: cfg.Portal,
		health: health{store: cfg.Store}, appURL: cfg.PalmAppURL, resources: cfg.Resources, brand: cfg.Brand,
	}
	if s.logger == nil {
		s.logger = zap.NewNop()
	}
	if s.clientIP == nil {
		s.clientIP = RemoteIP
	}
	s.limiter = newLimiter(cfg.RateLimit, s.clientIP)
	s.mux = s.routes()
	return s
}

// OwnsPath reports whether p is one of palmgate's paths (/v1, /oauth2, /portal
// and /health, and what is under them, and the /.well-known metadata families of
// wellknown.go); the Caddy handler passes the others on. An unknown path under
// them is palmgate's 404 (a page or the JSON error), never the next handler's (an
// empty 200 on a site with nothing else).
func OwnsPath(p string) bool {
	if ownsWellKnown(p) {
		return true
	}
	for _, prefix := range []string{"/v1", "/oauth2", "/portal", "/health"} {
		if rest, ok := strings.CutPrefix(p, prefix); ok && (rest == "" || rest[0] == '/') {
			return true
		}
	}
	return false
}

// ServeHTTP serves palmgate's own routes. A path with dot segments or empty segments
// is no endpoint (404): http.ServeMux would answer it with an HTML redirect to its
// cleaned form, which for /v1/x/../../y leads out of the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p := r.URL.EscapedPath(); p != cleanPath(p) {
		s.writeNoRoute(w, r, errNoEndpoint)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// routes builds the mux of palmgate's paths. Each path answers 405 with an Allow
// header for the methods it does not serve, and unknown paths answer 404, both in
// their path's dialect (writeNoRoute).
func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	route := func(path string, methods map[string]http.HandlerFunc) {
		allowed := make([]string, 0, len(methods))
		for m, h := range methods {
			if m == otherMethods {
				continue
			}
			mux.HandleFunc(m+" "+path, h)
			allowed = append(allowed, m)
		}
		sort.Strings(allowed)
		allow := strings.Join(allowed, ", ")
		cors := methods[otherMethods] // a CORS route's headers (cors.go), nil elsewhere
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			if cors != nil {
				cors(w, r)
			}
			w.Header().Set("Allow", allow)
			s.writeNoRoute(w, r, fault.New(fault.MethodNotAllowed, codeMethodNotAllowed, "%s is not allowed here; use %s", r.Method, allow))
		})
	}
	route("/v1/agent/register/init", map[string]http.HandlerFunc{"POST": s.limited(s.handleRegisterInit, s.writeError)})
	route("/v1/agent/register/{sessionId}/status", map[string]http.HandlerFunc{"GET": s.handleRegisterStatus})
	route("/v1/agent/register/{sessionId}/verify", map[string]http.HandlerFunc{"GET": s.handleRegisterPage})
	route("/v1/agent/register/{sessionId}/decline", map[string]http.HandlerFunc{"POST": s.limited(s.handleRegisterDecline, s.writeDeclineError)})
	// The public reads answer any origin (cors.go): no credential, anyone may call them.
	route("/v1/agent/verify/signature", withOpenCORS(map[string]http.HandlerFunc{"POST": s.handleVerifySignature}))
	route("/v1/agent/verify/device/{deviceId}", withOpenCORS(map[string]http.HandlerFunc{"GET": s.handleLookupDevice}))
	route("/v1/agent/verify/public-key/{publicKey}", withOpenCORS(map[string]http.HandlerFunc{"GET": s.handleLookupPublicKey}))
	route("/v1/human/leaderboard", withOpenCORS(map[string]http.HandlerFunc{"GET": s.handleLeaderboard}))
	route("/v1/human/agents", map[string]http.HandlerFunc{"GET": s.handleAgentsPage})
	route("/v1/human/agents/remove", map[string]http.HandlerFunc{"POST": s.handleAgentsRemove})
	route("/v1/human/agents/revoke", map[string]http.HandlerFunc{"POST": s.handleAgentsRevoke})
	route("/v1/human/agents/signout", map[string]http.HandlerFunc{"POST": s.handleAgentsSignout})
	route("/v1/palm/challenges/{challengeId}", map[string]http.HandlerFunc{"GET": s.handlePalmChallenge})
	route("/v1/palm/challenges/{challengeId}/assertion", map[string]http.HandlerFunc{"POST": s.limited(s.handlePalmAssertion, s.writeError)})
	route("/v1/palm/challenges/{challengeId}/deny", map[string]http.HandlerFunc{"POST": s.limited(s.handlePalmDeny, s.writeError)})
	route("/v1/palm/challenges/{challengeId}/dev-scan", map[string]http.HandlerFunc{"POST": s.limited(s.handlePalmDevScan, s.writeError)})
	route("/oauth2/authorize", map[string]http.HandlerFunc{"GET": noStore(s.limited(s.handleAuthorize, s.writeOAuthOrPage)), "POST": noStore(s.limited(s.handleAuthorize, s.writeOAuthOrPage))})
	route("/oauth2/verify", map[string]http.HandlerFunc{"GET": s.handleLoginPage})
	route("/oauth2/verify/cancel", map[string]http.HandlerFunc{"POST": s.limited(s.handleLoginCancel, s.writeCancelError)})
	route("/oauth2/consent", map[string]http.HandlerFunc{"GET": s.handleConsentPage, "POST": s.limited(s.handleConsent, s.writeConsentError)})
	if s.oidc != nil && s.oidc.RegistrationOpen() { // off: no route, 404 whatever the method (register.go)
		route("/oauth2/register", withRegistrationCORS(map[string]http.HandlerFunc{"POST": s.limited(s.handleRegister, s.writeOAuthError)}))
	}
	route("/oauth2/token", s.withCORS(map[string]http.HandlerFunc{"POST": s.handleToken}))
	route("/oauth2/userinfo", withOpenCORS(map[string]http.HandlerFunc{"GET": s.handleUserinfo, "POST": s.handleUserinfo}))
	route("/oauth2/.well-known/openid-configuration", withOpenCORS(map[string]http.HandlerFunc{"GET": s.handleDiscovery}))
	route("/oauth2/jwks", withOpenCORS(map[string]http.HandlerFunc{"GET": s.handleJWKS}))
	route("/oauth2/introspect", map[string]http.HandlerFunc{"POST": s.handleIntrospect})
	route("/oauth2/revoke", s.withCORS(map[string]http.HandlerFunc{"POST": s.handleRevoke}))
	route("/oauth2/logout", map[string]http.HandlerFunc{"GET": s.limited(s.handleLogout, s.writeLogoutError), "POST": s.limited(s.handleLogout, s.writeLogoutError)})
	// HEAD named too, so that a 405 lists it: load balancers probe with HEAD.
	route(PathAlive, map[string]http.HandlerFunc{"GET": s.handleAlive, "HEAD": s.handleAlive})
	route(PathReady, map[string]http.HandlerFunc{"GET": s.handleReady, "HEAD": s.handleReady})
	s.wellKnownRoutes(route)
	mux.HandleFunc("/oauth2/check", s.handleCheck)
	mux.HandleFunc("/oauth2/check/", s.handleCheck) // gateways that append the original path (Envoy ext_authz)
	if s.portal != nil {
		mux.Handle("/portal", s.portal)
		mux.Handle("/portal/", s.portal)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeNoRoute(w, r, errNoEndpoint)
	})
	return mux
}

// writeNoRoute answers err, the mux's 404 (no such path) or 405 (no such method
// on a path, Allow set), in the dialect of r's path, with the error page to a
// browser in each: OAuth's {"error":"invalid_request","error_description"} under
// /oauth2 and in the /.well-known families, whose callers are OAuth clients that
// read error as a code (fourth review: they got /v1's prose there, as Hydra
// would not), the /v1 body elsewhere (/v1, /health, the portal when off).
func (s *Server) writeNoRoute(w http.ResponseWriter, r *http.Request, err error) {
	if oauthPath(r.URL.Path) {
		s.writeOAuthOrPage(w, r, err)
		return
	}
	s.writeV1OrPage(w, r, err)
}

// oauthPath reports whether p is under /oauth2 or in a /.well-known family.
func oauthPath(p string) bool {
	if rest, ok := strings.CutPrefix(p, "/oauth2"); ok && (rest == "" || rest[0] == '/') {
		return true
	}
	return ownsWellKnown(p)
}

// cleanPath is the canonical form of a URL path, as http.ServeMux computes it:
// no dot segments, no empty segments, the trailing slash kept.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

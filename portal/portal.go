// Package portal is palmgate's self-service developer portal at /portal: a
// developer signs in with palmgate itself (the portal is a first-party OpenID
// Connect client of the provider, through the same /oauth2/authorize and palm flow
// as any application) and registers, edits, rotates the secret of and deletes their
// applications (dynamic clients of core/oidc). It is plain net/http: the server
// that mounts it only routes /portal and /portal/* to Handler.
//
// A developer is their humanId: the same person whatever the portal's sector, and
// the owner recorded on their applications; a developer sees and changes only the
// applications they own (another's answers 404, as if it did not exist).
package portal

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/internal/brand"
	"github.com/palmgate/palmgate/storage"
)

// ClientID is the portal's reserved client id; its redirect URI is
// {issuer}/portal/callback.
const ClientID = "palmgate-portal"

// DefaultSessionTTL is how long a developer stays signed in.
const DefaultSessionTTL = 2 * time.Hour

// Config builds a Portal.
type Config struct {
	OIDC *oidc.Service
	// Store keeps the live sessions (the store the provider runs on).
	Store storage.Store
	// Issuer is the service's public base URL (no path).
	Issuer string
	// Dev allows http redirect URIs on any host and says so on the page.
	Dev    bool
	Logger *zap.Logger
	// SessionTTL is how long a sign-in lasts; zero means DefaultSessionTTL.
	SessionTTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Brand is the operator's brand on the portal's page (validated by the
	// caller); the zero Brand is palmgate's own.
	Brand brand.Brand
}

// Portal serves the developer portal.
type Portal struct {
	oidc       *oidc.Service
	store      storage.Store
	issuer     string
	dev        bool
	secure     bool
	logger     *zap.Logger
	sessionTTL time.Duration
	now        func() time.Time
	key        []byte
	brand      brand.Brand
	mux        *http.ServeMux
}

// RedirectURI is the portal client's redirect URI for issuer.
func RedirectURI(issuer string) string { return issuer + "/portal/callback" }

// StaticClient is the portal's registration as a static client of the provider. Its
// secret is random and never used: the portal redeems its codes in process.
func StaticClient(issuer string) oidc.Client {
	return oidc.Client{
		ID: ClientID, Secret: randomString(32), Name: "palmgate developer portal",
		RedirectURIs: []string{RedirectURI(issuer)}, Scopes: []string{oidc.ScopeOpenID},
	}
}

// New builds the portal.
func New(cfg Config) *Portal {
	p := &Portal{
		oidc: cfg.OIDC, store: cfg.Store, issuer: cfg.Issuer, dev: cfg.Dev, logger: cfg.Logger, sessionTTL: cfg.SessionTTL, now: cfg.Now,
		brand:  cfg.Brand,
		secure: strings.HasPrefix(cfg.Issuer, "https://"),
	}
	if p.sessionTTL <= 0 {
		p.sessionTTL = DefaultSessionTTL
	}
	if p.now == nil {
		p.now = time.Now
	}
	if p.logger == nil {
		p.logger = zap.NewNop()
	}
	p.key = cfg.OIDC.DerivedKey("portal")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /portal", p.home)
	mux.HandleFunc("GET /portal/{$}", p.home)
	mux.HandleFunc("GET /portal/login", p.login)
	mux.HandleFunc("GET /portal/callback", p.callback)
	mux.HandleFunc("POST /portal/logout", p.authed(p.logout))
	mux.HandleFunc("POST /portal/apps", p.authed(p.create))
	mux.HandleFunc("GET /portal/apps/{id}", p.authed(p.show))
	mux.HandleFunc("POST /portal/apps/{id}", p.authed(p.update))
	mux.HandleFunc("POST /portal/apps/{id}/rotate", p.authed(p.rotate))
	mux.HandleFunc("POST /portal/apps/{id}/delete", p.authed(p.remove))
	for path, allow := range map[string]string{
		"/portal": "GET", "/portal/{$}": "GET", "/portal/login": "GET", "/portal/callback": "GET", "/portal/logout": "POST",
		"/portal/apps": "POST", "/portal/apps/{id}": "GET, POST", "/portal/apps/{id}/rotate": "POST", "/portal/apps/{id}/delete": "POST",
	} {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			p.fail(w, r, http.StatusMethodNotAllowed, "This page answers "+allow+" only.")
		})
	}
	mux.HandleFunc("/portal/", func(w http.ResponseWriter, r *http.Request) {
		p.fail(w, r, http.StatusNotFound, "There is no such page.")
	})
	p.mux = mux
	return p
}

// maxFormBytes bounds a portal form's body, as edge.MaxBodyBytes bounds the
// others'; over it the form is 413.
const maxFormBytes = 64 << 10

// ServeHTTP serves /portal and /portal/*.
func (p *Portal) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.mux.ServeHTTP(w, r) }

// authed runs h for a signed-in developer, after checking a POST's CSRF token; a
// request without a live session is sent to the home page (GET) or refused (POST),
// and one whose session the store cannot confirm is answered 503.
func (p *Portal) authed(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := p.session(r)
		if err != nil {
			p.internal(w, r, err)
			return
		}
		r = withSession(r, s)
		if s == nil {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/portal", http.StatusSeeOther)
				return
			}
			p.fail(w, r, http.StatusUnauthorized, "Your session has ended: sign in again.")
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			if err := r.ParseForm(); err != nil {
				var tooLarge *http.MaxBytesError
				if errors.As(err, &tooLarge) { // RFC 9110 15.5.14 (fourth review: it was 400)
					p.fail(w, r, http.StatusRequestEntityTooLarge, "The form is larger than 64 KiB, so it was not read: nothing was changed.")
					return
				}
				p.fail(w, r, http.StatusBadRequest, "The form could not be read.")
				return
			}
			if !p.checkCSRF(r, s) {
				p.fail(w, r, http.StatusForbidden, "The form is stale or did not come from this portal (CSRF token missing or wrong). Reload the page and try again.")
				return
			}
		}
		h(w, r, s)
	}
}

// sessionContextKey is the request context's key of the live session, for the
// pages that show it (fail).
type sessionContextKey struct{}

func withSession(r *http.Request, s *session) *http.Request {
	if s == nil {
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), sessionContextKey{}, s))
}

// checkedSession is the live session authed or home found, or nil.
func checkedSession(r *http.Request) *session {
	s, _ := r.Context().Value(sessionContextKey{}).(*session)
	return s
}

func (p *Portal) home(w http.ResponseWriter, r *http.Request) {
	s, err := p.session(r)
	if err != nil {
		p.internal(w, r, err)
		return
	}
	r = withSession(r, s)
	if s == nil {
		p.render(w, r, http.StatusOK, &pageData{Title: "Developer portal"})
		return
	}
	apps, err := p.oidc.Clients().List(r.Context(), s.HumanID)
	if err != nil {
		p.internal(w, r, err)
		return
	}
	p.render(w, r, http.StatusOK, &pageData{Title: "Your applications", Session: s, Apps: apps})
}

// loginTTL is how long the state of a sign-in lasts: the provider's whole login
// window (login_ttl, then the code's life), and a minute for the redirects, so
// that a person who takes all the time the provider allows is not turned away
// by the portal.
func (p *Portal) loginTTL() time.Duration { return p.oidc.LoginWindow() + time.Minute }

// login starts the sign-in: an authorization request of the portal client, with
// state and PKCE, through the provider's own authorize endpoint. It asks for a
// new palm scan (prompt=login) even within a single sign-on session: the portal
// shows and rotates client secrets, which a browser left signed in must not give
// away with one click.
func (p *Portal) login(w http.ResponseWriter, r *http.Request) {
	ttl := p.loginTTL()
	st := loginState{State: randomString(16), Verifier: randomString(32), Expires: p.now().Add(ttl).Unix()}
	p.setCookie(w, loginCookie, p.seal("login", st), ttl)
	sum := sha256.Sum256([]byte(st.Verifier))
	q := url.Values{
		"response_type": {"code"}, "client_id": {ClientID}, "redirect_uri": {RedirectURI(p.issuer)},
		"scope": {oidc.ScopeOpenID}, "state": {st.State},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
		"prompt": {"login"},
	}
	http.Redirect(w, r, p.issuer+"/oauth2/authorize?"+q.Encode(), http.StatusFound)
}

// callback finishes the sign-in: the state must be this browser's, and the code is
// redeemed in process (the same checks as the token endpoint's) for the humanId.
func (p *Portal) callback(w http.ResponseWriter, r *http.Request) {
	var st loginState
	c, err := r.Cookie(p.cookieName(loginCookie))
	if err != nil || !p.open("login", c.Value, &st) || p.now().Unix() >= st.Expires {
		p.fail(w, r, http.StatusBadRequest, "This sign-in was not started in this browser, or took too long. Sign in again.")
		return
	}
	q := r.URL.Query()
	if q.Get("state") != st.State {
		p.fail(w, r, http.StatusBadRequest, "The sign-in answer does not match this browser's sign-in. Sign in again.")
		return
	}
	p.clearCookie(w, loginCookie)
	if e := q.Get("error"); e != "" {
		p.fail(w, r, http.StatusForbidden, "The sign-in was refused ("+e+").")
		return
	}
	humanID, err := p.oidc.RedeemFirstParty(r.Context(), ClientID, q.Get("code"), RedirectURI(p.issuer), st.Verifier)
	if err != nil {
		if f, ok := fault.As(err); ok && oidc.IsOAuthCode(f.Code) && f.Class != fault.Unavailable {
			p.fail(w, r, http.StatusBadRequest, "The sign-in could not be completed: "+f.Message+". Sign in again.")
			return
		}
		p.internal(w, r, err)
		return
	}
	if err := p.startSession(r.Context(), w, r, humanID); err != nil {
		p.internal(w, r, err)
		return
	}
	http.Redirect(w, r, "/portal", http.StatusSeeOther)
}

// logout ends the session in the store, then drops its cookie: a copy of the
// cookie kept elsewhere is refused too. When the store cannot be written the
// session stays, and the developer is told so (503), not that they signed out.
func (p *Portal) logout(w http.ResponseWriter, r *http.Request, s *session) {
	if err := p.endSession(r.Context(), s); err != nil {
		p.internal(w, r, err)
		return
	}
	p.clearCookie(w, sessionCookie)
	http.Redirect(w, r, "/portal", http.StatusSeeOther)
}

// redirectURIs reads the form's redirect URIs: one per line.
func redirectURIs(r *http.Request) []string {
	var out []string
	for _, line := range strings.Split(r.PostFormValue("redirect_uris"), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// logoutFields sets spec's post-logout redirect URIs (one per line), ID token
// algorithm and access token audience from the form; a field the form lacks is
// left unchanged.
func logoutFields(r *http.Request, spec *oidc.ClientSpec) {
	if _, ok := r.PostForm["post_logout_redirect_uris"]; ok {
		spec.PostLogoutRedirectURIs = []string{}
		for _, line := range strings.Split(r.PostFormValue("post_logout_redirect_uris"), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				spec.PostLogoutRedirectURIs = append(spec.PostLogoutRedirectURIs, line)
			}
		}
	}
	if _, ok := r.PostForm["backchannel_logout_uri"]; ok {
		u := strings.TrimSpace(r.PostFormValue("backchannel_logout_uri"))
		spec.BackchannelLogoutURI = &u
	}
	if _, ok := r.PostForm["id_token_signed_response_alg"]; ok {
		alg := r.PostFormValue("id_token_signed_response_alg")
		spec.IDTokenAlg = &alg
	}
	if _, ok := r.PostForm["access_token_audience"]; ok {
		aud := r.PostFormValue("access_token_audience")
		spec.AccessTokenAudience = &aud
	}
	if _, ok := r.PostForm["allowed_origins"]; ok {
		spec.AllowedOrigins = []string{}
		for _, line := range strings.Split(r.PostFormValue("allowed_origins"), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				spec.AllowedOrigins = append(spec.AllowedOrigins, line)
			}
		}
	}
}

func (p *Portal) create(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PostFormValue("name")
	spec := oidc.ClientSpec{Name: &name, RedirectURIs: redirectURIs(r), Owner: s.HumanID,
		Public: r.PostFormValue("public") == "on"}
	logoutFields(r, &spec)
	ci, secret, err := p.oidc.Clients().Create(r.Context(), spec)
	if err != nil {
		p.createFailed(w, r, s, err)
		return
	}
	if spec.Public {
		p.showApp(w, r, s, ci, "", "Application created. It is public: it has no secret, and must use PKCE (S256).")
		return
	}
	p.showApp(w, r, s, ci, secret, "Application created. Copy its secret now: it is shown only once.")
}

// app returns the session's application id, or answers 404.
func (p *Portal) app(w http.ResponseWriter, r *http.Request, s *session) *oidc.ClientInfo {
	ci, err := p.oidc.Clients().Get(r.Context(), r.PathValue("id"))
	if err == nil && (ci.Static || ci.Owner != s.HumanID) {
		err = oidc.ErrClientNotFound
	}
	if err != nil {
		p.clientError(w, r, err)
		return nil
	}
	return ci
}

func (p *Portal) show(w http.ResponseWriter, r *http.Request, s *session) {
	if ci := p.app(w, r, s); ci != nil {
		p.showApp(w, r, s, ci, "", "")
	}
}

func (p *Portal) update(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PostFormValue("name")
	spec := oidc.ClientSpec{Name: &name, RedirectURIs: redirectURIs(r)}
	logoutFields(r, &spec)
	ci, err := p.oidc.Clients().Update(r.Context(), r.PathValue("id"), s.HumanID, spec)
	if err != nil {
		if status, msg, ok := clientFault(err); ok && status != http.StatusNotFound {
			p.appFormFailed(w, r, s, "edit", status, msg)
			return
		}
		p.clientError(w, r, err)
		return
	}
	p.showApp(w, r, s, ci, "", "Saved.")
}

func (p *Portal) rotate(w http.ResponseWriter, r *http.Request, s *session) {
	grace, ok := parseGrace(r.PostFormValue("grace"))
	if !ok {
		p.appFormFailed(w, r, s, "rotate", http.StatusBadRequest, "The grace period is a duration such as 24h, 90m, 1d or 0s (0s stops the current secret at once).")
		return
	}
	ci, secret, err := p.oidc.Clients().RotateSecret(r.Context(), r.PathValue("id"), s.HumanID, grace)
	if err != nil {
		if status, msg, ok := clientFault(err); ok && status != http.StatusNotFound {
			p.appFormFailed(w, r, s, "rotate", status, msg)
			return
		}
		p.clientError(w, r, err)
		return
	}
	p.showApp(w, r, s, ci, secret, "New secret issued. Copy it now: it is shown only once.")
}

func (p *Portal) remove(w http.ResponseWriter, r *http.Request, s *session) {
	if err := p.oidc.Clients().Delete(r.Context(), r.PathValue("id"), s.HumanID); errors.Is(err, oidc.ErrAfterClientDeletion) {
		p.logger.Warn("portal: the deleted client's grants and consents", zap.String("client_id", r.PathValue("id")), zap.Error(err))
	} else if err != nil {
		p.clientError(w, r, err)
		return
	}
	http.Redirect(w, r, "/portal", http.StatusSeeOther)
}

// clientError answers a registry error with its 4xx page.
func (p *Portal) clientError(w http.ResponseWriter, r *http.Request, err error) {
	if status, msg, ok := clientFault(err); ok {
		p.fail(w, r, status, msg)
		return
	}
	p.internal(w, r, err)
}

// internal answers a failure that is not the developer's: 503 with Retry-After
// when it is a temporary refusal (an Unavailable fault: the store's outage
// included, see fault.As) or timed out, else 500, logged.
func (p *Portal) internal(w http.ResponseWriter, r *http.Request, err error) {
	f, ok := fault.As(err)
	if (ok && f.Class == fault.Unavailable) || errors.Is(err, context.DeadlineExceeded) {
		retry := fault.StorageRetryAfter
		if ok && f.RetryAfter > 0 {
			retry = f.RetryAfter
		}
		w.Header().Set("Retry-After", strconv.Itoa(int(max(math.Ceil(retry.Seconds()), 1))))
		p.fail(w, r, http.StatusServiceUnavailable, "The service is busy; try again in a moment.")
		return
	}
	p.logger.Error("portal request failed", zap.String("path", r.URL.Path), zap.Error(err))
	p.fail(w, r, http.StatusInternalServerError, "Something went wrong on our side.")
}

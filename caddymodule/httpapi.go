package caddymodule

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"mime"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/agent"
	"github.com/palmgate/palmgate/core/jsonobject"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/storage"
)

// statusClientClosedRequest is the non-standard status Caddy and nginx log when the
// client went away before the answer.
const statusClientClosedRequest = 499

// maxBodyBytes bounds every request body palmgate reads.
const maxBodyBytes = 64 << 10

// apiError is the error body of the /v1 interface: {"error","code","details"}.
type apiError struct {
	Status  int            `json:"-"`
	Message string         `json:"error"`
	Code    string         `json:"code,omitempty"`
	Details map[string]any `json:"details,omitempty"`
}

func (e *apiError) Error() string { return e.Message }

// Stable codes of errors raised by the HTTP edge itself (the domain's are in
// core/agent and errorFor).
const (
	codeBodyTooLarge       = "body_too_large"
	codeUnsupportedMedia   = "unsupported_media_type"
	codeMethodNotAllowed   = "method_not_allowed"
	codeNotFound           = "not_found"
	codeInternal           = "internal_error"
	codeRateLimited        = "rate_limited"
	codeClientClosed       = "client_closed_request"
	codeScanURLExpired     = "scan_url_expired"
	codeTooManyPending     = "too_many_pending_requests"
	codeStorageUnavailable = "storage_unavailable"
)

// storageRetryAfter is the Retry-After of answers refused because the database is
// unavailable: long enough for a restart or a failover to begin to show.
const storageRetryAfter = 5 * time.Second

// retryAfter says whether err is a temporary refusal, and when to retry.
func retryAfter(err error) (time.Duration, bool) {
	var busy *palm.BusyError
	switch {
	case errors.As(err, &busy):
		return busy.RetryAfter, true
	case errors.Is(err, storage.ErrUnavailable):
		return storageRetryAfter, true
	}
	return 0, false
}

// setRetryAfter sets Retry-After to d in whole seconds, at least one.
func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int(max(math.Ceil(d.Seconds()), 1))))
}

// routes builds the mux of palmgate's paths. Each path answers 405 with an Allow
// header for the methods it does not serve, and unknown paths answer 404, both with
// the JSON error body.
func (a *App) routes() *http.ServeMux {
	mux := http.NewServeMux()
	route := func(path string, methods map[string]http.HandlerFunc) {
		allowed := make([]string, 0, len(methods))
		for m, h := range methods {
			mux.HandleFunc(m+" "+path, h)
			allowed = append(allowed, m)
		}
		sort.Strings(allowed)
		allow := strings.Join(allowed, ", ")
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeJSON(w, http.StatusMethodNotAllowed, &apiError{Message: r.Method + " is not allowed here; use " + allow, Code: codeMethodNotAllowed})
		})
	}
	route("/v1/agent/register/init", map[string]http.HandlerFunc{"POST": a.limited(a.handleRegisterInit)})
	route("/v1/agent/register/{sessionId}/status", map[string]http.HandlerFunc{"GET": a.handleRegisterStatus})
	route("/v1/agent/register/{sessionId}/verify", map[string]http.HandlerFunc{"GET": a.handleRegisterPage})
	route("/v1/agent/verify/signature", map[string]http.HandlerFunc{"POST": a.handleVerifySignature})
	route("/v1/agent/verify/device/{deviceId}", map[string]http.HandlerFunc{"GET": a.handleLookupDevice})
	route("/v1/agent/verify/public-key/{publicKey}", map[string]http.HandlerFunc{"GET": a.handleLookupPublicKey})
	route("/v1/human/leaderboard", map[string]http.HandlerFunc{"GET": a.handleLeaderboard})
	route("/v1/palm/challenges/{challengeId}", map[string]http.HandlerFunc{"GET": a.handlePalmChallenge})
	route("/v1/palm/challenges/{challengeId}/assertion", map[string]http.HandlerFunc{"POST": a.limited(a.handlePalmAssertion)})
	route("/v1/palm/challenges/{challengeId}/deny", map[string]http.HandlerFunc{"POST": a.limited(a.handlePalmDeny)})
	route("/v1/palm/challenges/{challengeId}/dev-scan", map[string]http.HandlerFunc{"POST": a.limited(a.handlePalmDevScan)})
	route("/oauth2/authorize", map[string]http.HandlerFunc{"GET": a.limited(a.handleAuthorize), "POST": a.limited(a.handleAuthorize)})
	route("/oauth2/verify", map[string]http.HandlerFunc{"GET": a.handleLoginPage})
	route("/oauth2/token", map[string]http.HandlerFunc{"POST": a.handleToken})
	route("/oauth2/userinfo", map[string]http.HandlerFunc{"GET": a.handleUserinfo, "POST": a.handleUserinfo})
	route("/oauth2/.well-known/openid-configuration", map[string]http.HandlerFunc{"GET": a.handleDiscovery})
	route("/oauth2/jwks", map[string]http.HandlerFunc{"GET": a.handleJWKS})
	route("/oauth2/introspect", map[string]http.HandlerFunc{"POST": a.handleIntrospect})
	route("/oauth2/revoke", map[string]http.HandlerFunc{"POST": a.handleRevoke})
	route("/oauth2/logout", map[string]http.HandlerFunc{"GET": a.limited(a.handleLogout), "POST": a.limited(a.handleLogout)})
	mux.HandleFunc("/oauth2/check", a.handleCheck)
	mux.HandleFunc("/oauth2/check/", a.handleCheck) // gateways that append the original path (Envoy ext_authz)
	portal := a.portalHandler()
	mux.Handle("/portal", portal)
	mux.Handle("/portal/", portal)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, &apiError{Message: "no such endpoint", Code: codeNotFound})
	})
	return mux
}

// readJSON reads a bounded application/json body into v (or, with v nil, returns it).
func readJSONBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "application/json" {
		return nil, &apiError{Status: http.StatusUnsupportedMediaType, Message: "Content-Type must be application/json", Code: codeUnsupportedMedia}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, &apiError{Status: http.StatusRequestEntityTooLarge, Message: "body is larger than 64 KiB", Code: codeBodyTooLarge}
		}
		return nil, &apiError{Status: http.StatusBadRequest, Message: "reading body: " + err.Error(), Code: agent.CodeInvalidBody}
	}
	// encoding/json would replace invalid UTF-8 with U+FFFD (a palmSubject or nonce
	// other than the one sent), and would decode null into an empty object.
	if !utf8.Valid(body) {
		return nil, &apiError{Status: http.StatusBadRequest, Message: "body is not valid UTF-8", Code: agent.CodeInvalidBody}
	}
	if rest := bytes.TrimLeft(body, " \t\r\n"); len(rest) == 0 || rest[0] != '{' {
		return nil, &apiError{Status: http.StatusBadRequest, Message: "body is not a JSON object", Code: agent.CodeInvalidBody}
	}
	return body, nil
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

// decodeJSON reads a bounded JSON body into v, a pointer to a struct. Keys match
// field names exactly (a case variant is an unknown key, ignored like the others)
// and a key given twice is refused (jsonobject.Decode).
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) *apiError {
	body, apiErr := readJSONBody(w, r)
	if apiErr != nil {
		return apiErr
	}
	if err := jsonobject.Decode(body, v); err != nil {
		var dupErr *jsonobject.DuplicateError
		if errors.As(err, &dupErr) {
			return &apiError{Status: http.StatusBadRequest, Message: "body has the key " + strconv.Quote(dupErr.Name) + " more than once",
				Code: agent.CodeInvalidBody, Details: map[string]any{"field": dupErr.Name}}
		}
		return &apiError{Status: http.StatusBadRequest, Message: "body is not the expected JSON object", Code: agent.CodeInvalidBody}
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers err with its status and the JSON error body. Errors that are
// not the client's are logged and answered 500 without detail.
func (a *App) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		// The client went away: nobody reads the answer, and it is not a fault.
		writeJSON(w, statusClientClosedRequest, &apiError{Message: "client closed the request", Code: codeClientClosed})
		return
	}
	if d, ok := retryAfter(err); ok {
		setRetryAfter(w, d)
	}
	e := a.errorFor(err)
	if e.Status == http.StatusInternalServerError {
		a.logger.Error("palmgate request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
	}
	writeJSON(w, e.Status, e)
}

// errorFor maps domain errors to HTTP: the one place that knows both.
func (a *App) errorFor(err error) *apiError {
	var e *apiError
	if errors.As(err, &e) {
		return e
	}
	var ae *agent.Error
	if errors.As(err, &ae) {
		status := http.StatusBadRequest
		switch {
		case errors.Is(ae.Kind, agent.ErrAlreadyRegistered):
			status = http.StatusConflict
		case errors.Is(ae.Kind, agent.ErrSessionNotFound):
			status = http.StatusNotFound
		case errors.Is(ae.Kind, agent.ErrTooManyPending):
			status = http.StatusTooManyRequests
		}
		return &apiError{Status: status, Message: ae.Message, Code: ae.Code, Details: ae.Details}
	}
	var busy *palm.BusyError
	if errors.As(err, &busy) {
		return &apiError{Status: http.StatusServiceUnavailable, Message: busy.Error(), Code: codeTooManyPending}
	}
	if errors.Is(err, storage.ErrUnavailable) {
		return &apiError{Status: http.StatusServiceUnavailable, Message: "the database is unavailable; retry later", Code: codeStorageUnavailable}
	}
	for _, m := range []struct {
		kind   error
		status int
		code   string
	}{
		{palm.ErrMalformed, http.StatusBadRequest, "invalid_assertion"},
		{palm.ErrBadAssertion, http.StatusUnauthorized, "assertion_refused"},
		{palm.ErrNotFound, http.StatusNotFound, "challenge_not_found"},
		{palm.ErrNotPending, http.StatusConflict, "challenge_not_pending"},
		{palm.ErrExpired, http.StatusGone, "challenge_expired"},
		{palm.ErrScanLapsed, http.StatusGone, codeScanURLExpired},
		{palm.ErrNoDevAttestor, http.StatusNotFound, codeNotFound},
	} {
		if errors.Is(err, m.kind) {
			return &apiError{Status: m.status, Message: err.Error(), Code: m.code}
		}
	}
	return &apiError{Status: http.StatusInternalServerError, Message: "internal server error", Code: codeInternal}
}

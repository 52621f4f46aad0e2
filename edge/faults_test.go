package edge

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/storage"
)

// busyFault is palm's refusal past its cap of pending logins: the global cap
// (503), or the network's own (429).
func busyFault(network bool, retry time.Duration) error {
	if network {
		return palm.Busy(palm.PurposeLogin, "192.0.2.0/24", retry)
	}
	return palm.Busy(palm.PurposeLogin, "", retry)
}

// storeDown is what a backend returns while the database cannot be reached: an
// error wrapping storage.ErrUnavailable, with text (a host name) the client must
// not see.
var storeDown = fmt.Errorf("pgstore: get on db.internal:5432: %w: connection refused", storage.ErrUnavailable)

// dialectCase is one class of error and what a dialect answers it with.
type dialectCase struct {
	name   string
	err    error
	status int
	code   string // the body's code ("" for a page)
	retry  string // Retry-After ("" for none)
	text   string // a text the body holds
}

// faultClasses are one error of each class of core's model, the store's outage
// and a busy refusal included, and an error that is no fault.
func faultClasses() []struct {
	name string
	err  error
} {
	return []struct {
		name string
		err  error
	}{
		{"invalid", fault.New(fault.Invalid, "invalid_request", "client_id is required")},
		{"unauthorized", fault.New(fault.Unauthorized, "invalid_client", "client authentication failed")},
		{"forbidden", fault.New(fault.Forbidden, "access_denied", "another browser")},
		{"not found", fault.New(fault.NotFound, "challenge_not_found", "no such challenge")},
		{"method not allowed", fault.New(fault.MethodNotAllowed, codeMethodNotAllowed, "PUT is not allowed here")},
		{"conflict", fault.New(fault.Conflict, "already_registered", "taken")},
		{"gone", fault.New(fault.Gone, "challenge_expired", "expired")},
		{"too large", fault.New(fault.TooLarge, codeBodyTooLarge, "the form body is larger than 64 KiB")},
		{"unsupported media", fault.New(fault.UnsupportedMedia, codeUnsupportedMedia, "Content-Type must be application/json")},
		{"busy network", busyFault(true, 7*time.Second)},
		{"busy", busyFault(false, 90*time.Second+time.Millisecond)},
		{"store down", storeDown},
		{"internal fault", fault.New(fault.Internal, "x", "secret internals")},
		{"no fault", errors.New("boom: secret internals")},
	}
}

// check asserts the answer w holds for tc.
func (tc dialectCase) check(t *testing.T, w *httptest.ResponseRecorder, codeField string) {
	t.Helper()
	if w.Code != tc.status {
		t.Errorf("status %d, want %d (body %s)", w.Code, tc.status, w.Body)
	}
	if got := w.Header().Get("Retry-After"); got != tc.retry {
		t.Errorf("Retry-After %q, want %q", got, tc.retry)
	}
	if tc.code != "" {
		var body map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("body %q: %v", w.Body, err)
		}
		if body[codeField] != tc.code {
			t.Errorf("%s %v, want %q (body %s)", codeField, body[codeField], tc.code, w.Body)
		}
	}
	if !strings.Contains(w.Body.String(), tc.text) {
		t.Errorf("body %s, want it to hold %q", w.Body, tc.text)
	}
	if strings.Contains(w.Body.String(), "secret internals") || strings.Contains(w.Body.String(), "db.internal") {
		t.Errorf("body %s tells the client what is not its business", w.Body)
	}
}

// TestV1Mapper: the /v1 dialect answers each class with its status, code and
// message, Retry-After for the busy refusals and the store's outage, and 500
// internal_error without detail for what is no fault.
func TestV1Mapper(t *testing.T) {
	want := map[string]dialectCase{
		"invalid":            {status: 400, code: "invalid_request", text: "client_id is required"},
		"unauthorized":       {status: 401, code: "invalid_client", text: "client authentication failed"},
		"forbidden":          {status: 403, code: "access_denied", text: "another browser"},
		"not found":          {status: 404, code: "challenge_not_found", text: "no such challenge"},
		"method not allowed": {status: 405, code: "method_not_allowed", text: "PUT is not allowed here"},
		"conflict":           {status: 409, code: "already_registered", text: "taken"},
		"gone":               {status: 410, code: "challenge_expired", text: "expired"},
		"too large":          {status: 413, code: "body_too_large", text: "64 KiB"},
		"unsupported media":  {status: 415, code: "unsupported_media_type", text: "application/json"},
		"busy network":       {status: 429, code: "too_many_pending_from_network", retry: "7", text: "from this network"},
		"busy":               {status: 503, code: "too_many_pending_requests", retry: "91", text: "retry later"},
		"store down":         {status: 503, code: "storage_unavailable", retry: "5", text: "the database is unavailable; retry later"},
		"internal fault":     {status: 500, code: "internal_error", text: "internal server error"},
		"no fault":           {status: 500, code: "internal_error", text: "internal server error"},
	}
	s := New(Config{})
	for _, c := range faultClasses() {
		t.Run(c.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			s.writeError(w, httptest.NewRequest("GET", "/v1/agent/verify/device/x", nil), c.err)
			want[c.name].check(t, w, "code")
			if ct := w.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}

// TestOAuthMapper: the OAuth dialect answers a fault of its vocabulary with its
// code and class's status (a Basic challenge with invalid_client), every temporary
// refusal as temporarily_unavailable with Retry-After (503, or 429 for a network
// at its cap), a body too large or of the wrong type, a method a route does not
// serve and the edge's own not_found (the mux's 404s) as invalid_request, and any
// other fault or error as 500 server_error.
func TestOAuthMapper(t *testing.T) {
	want := map[string]dialectCase{
		"invalid":            {status: 400, code: "invalid_request", text: "client_id is required"},
		"unauthorized":       {status: 401, code: "invalid_client", text: "client authentication failed"},
		"forbidden":          {status: 403, code: "access_denied", text: "another browser"},
		"not found":          {status: 500, code: "server_error", text: "internal server error"},
		"method not allowed": {status: 405, code: "invalid_request", text: "PUT is not allowed here"},
		"conflict":           {status: 500, code: "server_error", text: "internal server error"},
		"gone":               {status: 500, code: "server_error", text: "internal server error"},
		"too large":          {status: 413, code: "invalid_request", text: "64 KiB"},
		"unsupported media":  {status: 415, code: "invalid_request", text: "application/json"},
		"busy network":       {status: 429, code: "temporarily_unavailable", retry: "7", text: "from this network"},
		"busy":               {status: 503, code: "temporarily_unavailable", retry: "91", text: "retry later"},
		"store down":         {status: 503, code: "temporarily_unavailable", retry: "5", text: "the database is unavailable; retry later"},
		"internal fault":     {status: 500, code: "server_error", text: "internal server error"},
		"no fault":           {status: 500, code: "server_error", text: "internal server error"},
	}
	s := New(Config{})
	for _, c := range faultClasses() {
		t.Run(c.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			s.writeOAuthError(w, httptest.NewRequest("POST", "/oauth2/token", nil), c.err)
			want[c.name].check(t, w, "error")
			basic := w.Header().Get("WWW-Authenticate")
			if (c.name == "unauthorized") != (basic == `Basic realm="palmgate"`) {
				t.Errorf("WWW-Authenticate %q", basic)
			}
		})
	}
}

// TestChallengeMapper: the RFC 6750 dialect answers each refusal of
// bearer.Verifier.Check with its status, challenge and OAuth body: no error in the
// challenge without a token, error and description for invalid_token, error and
// scope for insufficient_scope (a scope that is no scope token left out), 503 with
// Retry-After and no challenge when tokens cannot be checked.
func TestChallengeMapper(t *testing.T) {
	for _, tc := range []struct {
		dialectCase
		challenge string
	}{
		{dialectCase{name: "no token", err: fault.Of(bearer.ErrNoToken, "a bearer access token is required"),
			status: 401, code: "invalid_request", text: "a bearer access token is required"},
			`Bearer realm="r"`},
		{dialectCase{name: "invalid token", err: fault.New(fault.Unauthorized, bearer.CodeInvalidToken, "the access token is invalid, expired or revoked"),
			status: 401, code: "invalid_token", text: "invalid, expired or revoked"},
			`Bearer realm="r", error="invalid_token", error_description="the access token is invalid, expired or revoked"`},
		{dialectCase{name: "invalid token, a message quoting the request", err: fault.New(fault.Invalid, bearer.CodeInvalidRequest, "audience %q is not an absolute URI", "x\"y\\zé"),
			status: 400, code: "invalid_request", text: "is not an absolute URI"},
			`Bearer realm="r", error="invalid_request", error_description="audience 'x/'y//z?' is not an absolute URI"`},
		{dialectCase{name: "insufficient scope", err: &fault.Error{Class: fault.Forbidden, Code: bearer.CodeInsufficientScope,
			Message: "the token lacks scope a b", Details: map[string]any{"scope": "a b"}},
			status: 403, code: "insufficient_scope", text: "lacks scope a b"},
			`Bearer realm="r", error="insufficient_scope", scope="a b"`},
		{dialectCase{name: "insufficient scope, not a scope token", err: &fault.Error{Class: fault.Forbidden, Code: bearer.CodeInsufficientScope,
			Message: "the token lacks scope a\"b", Details: map[string]any{"scope": "a\"b"}},
			status: 403, code: "insufficient_scope", text: "lacks scope"},
			`Bearer realm="r", error="insufficient_scope"`},
		{dialectCase{name: "issuer unavailable", err: &fault.Error{Class: fault.Unavailable, Code: bearer.CodeTemporarilyUnavailable,
			Message: "the token issuer cannot be reached", RetryAfter: fault.StorageRetryAfter, Kind: bearer.ErrIssuerUnavailable},
			status: 503, code: "temporarily_unavailable", retry: "5", text: "cannot be reached"}, ""},
		{dialectCase{name: "store down", err: storeDown,
			status: 503, code: "storage_unavailable", retry: "5", text: "the database is unavailable"}, ""},
		{dialectCase{name: "busy network", err: busyFault(true, 7*time.Second),
			status: 429, code: "too_many_pending_from_network", retry: "7", text: "from this network"}, ""},
		{dialectCase{name: "no fault", err: errors.New("boom: secret internals"),
			status: 500, code: "server_error", text: "internal server error"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			writeChallenge(w, "r", tc.err, New(Config{}).logger)
			tc.check(t, w, "error")
			if got := w.Header().Get("WWW-Authenticate"); got != tc.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tc.challenge)
			}
			h := http.Header{}
			if status := SetChallenge(h, "r", tc.err); status != tc.status || h.Get("WWW-Authenticate") != tc.challenge {
				t.Errorf("SetChallenge = %d, %q; want %d, %q", status, h.Get("WWW-Authenticate"), tc.status, tc.challenge)
			}
		})
	}
}

// TestPageMapper: the page dialect (the signed-out page of /oauth2/logout)
// answers each class with its status and message, a temporary refusal (the store's
// outage, a busy refusal) with its status, Retry-After and a "try again" line, and
// what is no fault 500 without detail; every answer is the HTML page.
func TestPageMapper(t *testing.T) {
	const again, wait = "Try again in a few minutes.", "Wait a minute, then try again."
	want := map[string]dialectCase{
		"invalid":            {status: 400, text: "client_id is required"},
		"unauthorized":       {status: 401, text: "client authentication failed"},
		"forbidden":          {status: 403, text: "another browser"},
		"not found":          {status: 404, text: "no such challenge"},
		"method not allowed": {status: 405, text: "PUT is not allowed here"},
		"conflict":           {status: 409, text: "taken"},
		"gone":               {status: 410, text: "expired"},
		"too large":          {status: 413, text: "64 KiB"},
		"unsupported media":  {status: 415, text: "application/json"},
		"busy network":       {status: 429, retry: "7", text: wait},
		"busy":               {status: 503, retry: "91", text: again},
		"store down":         {status: 503, retry: "5", text: again},
		"internal fault":     {status: 500, text: "internal server error"},
		"no fault":           {status: 500, text: "internal server error"},
	}
	s := New(Config{})
	for _, c := range faultClasses() {
		t.Run(c.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			r := httptest.NewRequest("GET", "/oauth2/logout", nil)
			r.Header.Set("Accept", "text/html")
			s.writeLogoutError(w, r, c.err)
			want[c.name].check(t, w, "")
			if ct := w.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" || !strings.Contains(w.Body.String(), "Sign-out refused") {
				t.Errorf("Content-Type %q, body %s: want the signed-out page", ct, w.Body)
			}
		})
	}
}

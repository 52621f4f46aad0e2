package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/jsonobject"
)

// statusClientClosedRequest is the non-standard status Caddy and nginx log when the
// client went away before the answer.
const statusClientClosedRequest = 499

// MaxBodyBytes bounds every request body palmgate reads (the admin API's too).
const MaxBodyBytes = 64 << 10

// v1Body is the error body of the /v1 interface, {"error","code","details"},
// with its status: what the /v1 mapper (v1Error) makes of an error. It is a body,
// not an error: errors are faults of core/fault.
type v1Body struct {
	Status  int            `json:"-"`
	Message string         `json:"error"`
	Code    string         `json:"code,omitempty"`
	Details map[string]any `json:"details,omitempty"`
}

// Stable codes of errors raised by the HTTP edge itself (the domain's are codes of
// core's error model, core/fault).
const (
	codeBodyTooLarge     = "body_too_large"
	codeUnsupportedMedia = "unsupported_media_type"
	codeMethodNotAllowed = "method_not_allowed"
	codeNotFound         = "not_found"
	codeInternal         = "internal_error"
	codeRateLimited      = "rate_limited"
	codeClientClosed     = "client_closed_request"
)

// errNoEndpoint answers a path that is no endpoint of palmgate's.
var errNoEndpoint = &fault.Error{Class: fault.NotFound, Code: codeNotFound, Message: "no such endpoint"}

// setRetryAfter sets Retry-After to d in whole seconds, at least one.
func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", retryAfterValue(d))
}

func retryAfterValue(d time.Duration) string {
	return strconv.Itoa(int(max(math.Ceil(d.Seconds()), 1)))
}

// readJSONBody reads a bounded application/json body holding a JSON object.
func readJSONBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	// The exact value nearly every client sends needs no parse (a map of its
	// parameters, on the hottest route of /v1).
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		mediaType, _, err := mime.ParseMediaType(ct)
		if err != nil || mediaType != "application/json" {
			return nil, fault.New(fault.UnsupportedMedia, codeUnsupportedMedia, "Content-Type must be application/json")
		}
	}
	body, err := readBody(w, r)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, fault.New(fault.TooLarge, codeBodyTooLarge, "body is larger than 64 KiB")
		}
		return nil, fault.New(fault.Invalid, fault.CodeInvalidBody, "reading body: %v", err)
	}
	// encoding/json would replace invalid UTF-8 with U+FFFD (a palmSubject or nonce
	// other than the one sent), and would decode null into an empty object.
	if !utf8.Valid(body) {
		return nil, fault.New(fault.Invalid, fault.CodeInvalidBody, "body is not valid UTF-8")
	}
	if rest := bytes.TrimLeft(body, " \t\r\n"); len(rest) == 0 || rest[0] != '{' {
		return nil, fault.New(fault.Invalid, fault.CodeInvalidBody, "body is not a JSON object")
	}
	return body, nil
}

// readBody reads the whole body, at most MaxBodyBytes (else a *http.MaxBytesError).
// A body that declares its length within the bound is read into a buffer of that
// size, in one allocation, and must then end.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	n := r.ContentLength
	if n < 0 || n > MaxBodyBytes {
		return io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r.Body, body); err != nil {
		return nil, err
	}
	var more [1]byte
	switch m, err := r.Body.Read(more[:]); {
	case m > 0:
		return nil, errors.New("the body is longer than its Content-Length")
	case err != nil && err != io.EOF:
		return nil, err
	}
	return body, nil
}

// decodeJSON reads a bounded JSON body into v, a pointer to a struct. Keys match
// field names exactly (a case variant is an unknown key, ignored like the others)
// and a key given twice is refused (jsonobject.Decode).
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := readJSONBody(w, r)
	if err != nil {
		return err
	}
	if err := jsonobject.Decode(body, v); err != nil {
		var dupErr *jsonobject.DuplicateError
		if errors.As(err, &dupErr) {
			return fault.Field(fault.Invalid, fault.CodeInvalidBody, dupErr.Name, "body has the key %s more than once", strconv.Quote(dupErr.Name))
		}
		return fault.New(fault.Invalid, fault.CodeInvalidBody, "body is not the expected JSON object")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	setJSONHeaders(w.Header())
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeJSONBody answers body, JSON already encoded, as writeJSON answers.
func writeJSONBody(w http.ResponseWriter, status int, body []byte) {
	setJSONHeaders(w.Header())
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func setJSONHeaders(h http.Header) {
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
}

// writeError answers err in the /v1 dialect (v1Error), with Retry-After when the
// fault says when to retry. Errors that are not the client's are logged and
// answered 500 without detail.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		// The client went away: nobody reads the answer, and it is not a fault.
		writeJSON(w, statusClientClosedRequest, &v1Body{Message: "client closed the request", Code: codeClientClosed})
		return
	}
	e, retry := v1Error(err)
	if e.Status == http.StatusInternalServerError {
		s.logger.Error("palmgate request failed", zap.String("method", r.Method), zap.String("path", logPath(r)), zap.Error(err))
	}
	writeV1(w, e, retry)
}

// logPath is what the error log says of r's path: the route it matched
// ("GET /v1/agent/register/{sessionId}/status"), not the path, whose segments
// may be capabilities (a registration session's id), else the path.
func logPath(r *http.Request) string {
	if r.Pattern != "" {
		return r.Pattern
	}
	return r.URL.Path
}

// writeV1 writes a /v1 error body with its status, and Retry-After when retry is
// positive.
func writeV1(w http.ResponseWriter, e *v1Body, retry time.Duration) {
	if retry > 0 {
		setRetryAfter(w, retry)
	}
	writeJSON(w, e.Status, e)
}

// Status is the HTTP status of each class of core's error model, for every
// dialect (the /v1 body, OAuth, the RFC 6750 challenge, the pages, the admin API).
func Status(c fault.Class) int {
	switch c {
	case fault.Invalid:
		return http.StatusBadRequest
	case fault.Unauthorized:
		return http.StatusUnauthorized
	case fault.Forbidden:
		return http.StatusForbidden
	case fault.NotFound:
		return http.StatusNotFound
	case fault.MethodNotAllowed:
		return http.StatusMethodNotAllowed
	case fault.Conflict:
		return http.StatusConflict
	case fault.Gone:
		return http.StatusGone
	case fault.TooLarge:
		return http.StatusRequestEntityTooLarge
	case fault.UnsupportedMedia:
		return http.StatusUnsupportedMediaType
	case fault.TooMany:
		return http.StatusTooManyRequests
	case fault.Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// v1Error is the /v1 dialect's mapper, the one place that maps an error to the
// body {"error","code","details"} and its status: a fault (fault.As, the store's
// outage included) by its class, with its code, details and Retry-After; anything
// else 500 internal_error without detail. A fault's message is its own when it is
// the error itself, or the whole text when it is wrapped with details.
func v1Error(err error) (*v1Body, time.Duration) {
	f, ok := fault.As(err)
	if !ok || f.Class == fault.Internal {
		return &v1Body{Status: http.StatusInternalServerError, Message: "internal server error", Code: codeInternal}, 0
	}
	msg := f.Message
	var direct *fault.Error
	if errors.As(err, &direct) && err != error(direct) {
		msg = err.Error()
	}
	return &v1Body{Status: Status(f.Class), Message: msg, Code: f.Code, Details: f.Details}, f.RetryAfter
}

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
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/storage"
)

// statusClientClosedRequest is the non-standard status Caddy and nginx log when the
// client went away before the answer.
const statusClientClosedRequest = 499

// MaxBodyBytes bounds every request body palmgate reads (the admin API's too).
const MaxBodyBytes = 64 << 10

// apiError is the error body of the /v1 interface: {"error","code","details"}.
type apiError struct {
	Status  int            `json:"-"`
	Message string         `json:"error"`
	Code    string         `json:"code,omitempty"`
	Details map[string]any `json:"details,omitempty"`
}

func (e *apiError) Error() string { return e.Message }

// Stable codes of errors raised by the HTTP edge itself (the domain's are codes of
// core's error model, core/fault).
const (
	codeBodyTooLarge       = "body_too_large"
	codeUnsupportedMedia   = "unsupported_media_type"
	codeMethodNotAllowed   = "method_not_allowed"
	codeNotFound           = "not_found"
	codeInternal           = "internal_error"
	codeRateLimited        = "rate_limited"
	codeClientClosed       = "client_closed_request"
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
	w.Header().Set("Retry-After", retryAfterValue(d))
}

func retryAfterValue(d time.Duration) string {
	return strconv.Itoa(int(max(math.Ceil(d.Seconds()), 1)))
}

// readJSONBody reads a bounded application/json body holding a JSON object.
func readJSONBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "application/json" {
		return nil, &apiError{Status: http.StatusUnsupportedMediaType, Message: "Content-Type must be application/json", Code: codeUnsupportedMedia}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, &apiError{Status: http.StatusRequestEntityTooLarge, Message: "body is larger than 64 KiB", Code: codeBodyTooLarge}
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
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers err in the /v1 dialect, with its status and the JSON error
// body. Errors that are not the client's are logged and answered 500 without
// detail.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		// The client went away: nobody reads the answer, and it is not a fault.
		writeJSON(w, statusClientClosedRequest, &apiError{Message: "client closed the request", Code: codeClientClosed})
		return
	}
	if d, ok := retryAfter(err); ok {
		setRetryAfter(w, d)
	}
	e := v1Error(err)
	if e.Status == http.StatusInternalServerError {
		s.logger.Error("palmgate request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
	}
	writeJSON(w, e.Status, e)
}

// Status is the HTTP status of each class of core's error model, for every
// dialect (the /v1 body, OAuth, the admin API).
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
	case fault.Conflict:
		return http.StatusConflict
	case fault.Gone:
		return http.StatusGone
	case fault.TooMany:
		return http.StatusTooManyRequests
	case fault.Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// v1Error maps an error to the /v1 body {"error","code","details"} and its status:
// the one place that does. A fault's message is its own when it is the error
// itself, or the whole text when it is wrapped with details.
func v1Error(err error) *apiError {
	var e *apiError
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, storage.ErrUnavailable) {
		return &apiError{Status: http.StatusServiceUnavailable, Message: "the database is unavailable; retry later", Code: codeStorageUnavailable}
	}
	var f *fault.Error
	var faulter fault.Faulter
	msg := ""
	switch {
	case errors.As(err, &f):
		msg = f.Message
		if err != error(f) {
			msg = err.Error()
		}
	case errors.As(err, &faulter):
		f = faulter.Fault()
		msg = f.Message
	}
	if f != nil && f.Class != fault.Internal {
		return &apiError{Status: Status(f.Class), Message: msg, Code: f.Code, Details: f.Details}
	}
	return &apiError{Status: http.StatusInternalServerError, Message: "internal server error", Code: codeInternal}
}

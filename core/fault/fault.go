// Package fault is the one error model of palmgate: an error a client caused, or
// may retry, carries a status class, a stable machine code, a message, optional
// details and, when it is temporary, when to retry. Core returns faults; each HTTP
// dialect of the edge (the /v1 JSON body, OAuth's JSON and redirects, the RFC 6750
// challenge, the pages) has one mapper that turns a fault into its status, headers
// and body, and nothing else decides a status. An error that is no fault (nor the
// store's unavailability, see As) is a server error in every dialect.
package fault

import (
	"errors"
	"fmt"
	"time"

	"github.com/palmgate/palmgate/storage"
)

// Class is what kind of refusal an error is; each dialect maps it to a status.
type Class int

// Classes, with the HTTP status each stands for.
const (
	Internal         Class = iota // 500: not the client's fault
	Invalid                       // 400
	Unauthorized                  // 401
	Forbidden                     // 403
	NotFound                      // 404
	Conflict                      // 409
	Gone                          // 410
	TooMany                       // 429 (with Retry-After when it says when)
	Unavailable                   // 503 (with Retry-After)
	MethodNotAllowed              // 405
	TooLarge                      // 413
	UnsupportedMedia              // 415
)

// Codes shared by several packages.
const (
	// CodeInvalidBody: the request body is not the expected JSON object.
	CodeInvalidBody = "invalid_body"
	// CodeInvalidField: a field (or query parameter) has a wrong value.
	CodeInvalidField = "invalid_field"
	// CodeStorageUnavailable: the store cannot be reached; retry later.
	CodeStorageUnavailable = "storage_unavailable"
)

// StorageRetryAfter is the Retry-After of answers refused because the store is
// unavailable: long enough for a restart or a failover to begin to show.
const StorageRetryAfter = 5 * time.Second

// Error is a typed error of core.
type Error struct {
	Class   Class
	Code    string
	Message string
	// Details are machine-readable details, such as {"field": "deviceId"}.
	Details map[string]any
	// RetryAfter, when positive, is when a temporary refusal (Unavailable, TooMany)
	// may be retried: the dialects send it as Retry-After.
	RetryAfter time.Duration
	// Kind is the sentinel error the error is of, for errors.Is (may be nil).
	Kind error
}

func (e *Error) Error() string { return e.Message }

// Unwrap lets errors.Is match the kind.
func (e *Error) Unwrap() error { return e.Kind }

// New returns an error of class with code and a formatted message.
func New(class Class, code, format string, args ...any) *Error {
	return &Error{Class: class, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Field returns an error of class with code about field (Details["field"]).
func Field(class Class, code, field, format string, args ...any) *Error {
	e := New(class, code, format, args...)
	e.Details = map[string]any{"field": field}
	return e
}

// Of returns an error of kind (a sentinel fault, such as a package's ErrNotFound):
// its class and code, with a formatted message, matching errors.Is(err, kind).
func Of(kind *Error, format string, args ...any) *Error {
	return &Error{Class: kind.Class, Code: kind.Code, Message: fmt.Sprintf(format, args...), Kind: kind}
}

// storageUnavailable is the fault of a store that cannot be reached.
var storageUnavailable = Error{Class: Unavailable, Code: CodeStorageUnavailable,
	Message: "the database is unavailable; retry later", RetryAfter: StorageRetryAfter}

// As returns the fault err is: the first *Error in its chain, or the Unavailable
// fault (with StorageRetryAfter) of an error wrapping storage.ErrUnavailable, the
// one place the store's outage becomes a fault. Any other error is not a fault
// (false): a server error.
func As(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	if errors.Is(err, storage.ErrUnavailable) {
		f := storageUnavailable
		f.Kind = err
		return &f, true
	}
	return nil, false
}

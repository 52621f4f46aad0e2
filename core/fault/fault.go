// Package fault is the one error model of core: an error a client caused, or may
// retry, carries a status class, a stable machine code, a message and optional
// details. Each HTTP dialect of the edge (the /v1 JSON body, OAuth's JSON and
// redirects, the pages) maps the class to a status in one place; the codes are the
// wire codes of the README's error tables.
package fault

import (
	"errors"
	"fmt"
)

// Class is what kind of refusal an error is; each dialect maps it to a status.
type Class int

// Classes, with the HTTP status each stands for.
const (
	Internal     Class = iota // 500: not the client's fault
	Invalid                   // 400
	Unauthorized              // 401
	Forbidden                 // 403
	NotFound                  // 404
	Conflict                  // 409
	Gone                      // 410
	TooMany                   // 429
	Unavailable               // 503 (with Retry-After)
)

// Codes shared by several packages.
const (
	// CodeInvalidBody: the request body is not the expected JSON object.
	CodeInvalidBody = "invalid_body"
	// CodeInvalidField: a field (or query parameter) has a wrong value.
	CodeInvalidField = "invalid_field"
)

// Error is a typed error of core.
type Error struct {
	Class   Class
	Code    string
	Message string
	// Details are machine-readable details, such as {"field": "deviceId"}.
	Details map[string]any
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

// Faulter is an error that has a fault of the model without being one (an error
// with fields of its own, such as a Retry-After).
type Faulter interface {
	error
	Fault() *Error
}

// As returns the first *Error in err's chain, or else the fault of its first
// Faulter.
func As(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	var f Faulter
	if errors.As(err, &f) {
		return f.Fault(), true
	}
	return nil, false
}

package agent

import (
	"errors"
	"fmt"

	"github.com/palmgate/palmgate/core/fault"
)

// Error kinds; the HTTP edge maps each to a status code. Every error this package
// returns for a client's mistake is an *Error wrapping one of them.
var (
	ErrInvalid           = errors.New("invalid request")
	ErrAlreadyRegistered = errors.New("agent already registered")
	ErrSessionNotFound   = errors.New("registration session not found")
	ErrTooManyPending    = errors.New("too many pending registration sessions")
)

// Stable machine codes of registry errors (the `code` of the error body).
const (
	CodeInvalidBody         = fault.CodeInvalidBody
	CodeMissingField        = "missing_field"
	CodeInvalidField        = fault.CodeInvalidField
	CodeInvalidPublicKey    = "invalid_public_key"
	CodeInvalidSignature    = "invalid_signature"
	CodeInvalidMessage      = "invalid_message"
	CodeTimestampMismatch   = "timestamp_mismatch"
	CodeTimestampWindow     = "timestamp_out_of_window"
	CodeSignatureMismatch   = "signature_mismatch"
	CodeReplayed            = "challenge_replayed"
	CodeAlreadyRegistered   = "already_registered"
	CodeSessionNotFound     = "session_not_found"
	CodeTooManyPendingInits = "too_many_pending_sessions"
)

// Error is a client-facing registry error: a fault of core's error model whose
// Kind is one of the kinds above.
type Error = fault.Error

// classOf is the status class of each kind.
var classOf = map[error]fault.Class{
	ErrInvalid:           fault.Invalid,
	ErrAlreadyRegistered: fault.Conflict,
	ErrSessionNotFound:   fault.NotFound,
	ErrTooManyPending:    fault.TooMany,
}

// newError returns an error of kind with code and message.
func newError(kind error, code, message string) *Error {
	return &Error{Class: classOf[kind], Kind: kind, Code: code, Message: message}
}

func invalid(code, field, format string, args ...any) *Error {
	e := newError(ErrInvalid, code, fmt.Sprintf(format, args...))
	if field != "" {
		e.Details = map[string]any{"field": field}
	}
	return e
}

package agent

import (
	"fmt"

	"github.com/palmgate/palmgate/core/fault"
)

// Error kinds, sentinel faults of core's error model whose class the HTTP edge
// maps to a status. Every error this package returns for a client's mistake is an
// *Error of one of them (errors.Is matches the kind).
var (
	ErrInvalid           = &fault.Error{Class: fault.Invalid, Message: "invalid request"}
	ErrAlreadyRegistered = &fault.Error{Class: fault.Conflict, Message: "agent already registered"}
	ErrSessionNotFound   = &fault.Error{Class: fault.NotFound, Message: "registration session not found"}
	ErrTooManyPending    = &fault.Error{Class: fault.TooMany, Message: "too many pending registration sessions"}
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

// newError returns an error of kind (its class) with code and message.
func newError(kind *fault.Error, code, message string) *Error {
	return &Error{Class: kind.Class, Kind: kind, Code: code, Message: message}
}

func invalid(code, field, format string, args ...any) *Error {
	e := newError(ErrInvalid, code, fmt.Sprintf(format, args...))
	if field != "" {
		e.Details = map[string]any{"field": field}
	}
	return e
}

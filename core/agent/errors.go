package agent

import (
	"errors"
	"fmt"
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
	CodeInvalidBody         = "invalid_body"
	CodeMissingField        = "missing_field"
	CodeInvalidField        = "invalid_field"
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

// Error is a client-facing registry error: a kind, a stable code, a message and
// optional details (such as the offending field).
type Error struct {
	Kind    error
	Code    string
	Message string
	Details map[string]any
}

func (e *Error) Error() string { return e.Message }

// Unwrap lets errors.Is match the kind.
func (e *Error) Unwrap() error { return e.Kind }

func invalid(code, field, format string, args ...any) *Error {
	e := &Error{Kind: ErrInvalid, Code: code, Message: fmt.Sprintf(format, args...)}
	if field != "" {
		e.Details = map[string]any{"field": field}
	}
	return e
}

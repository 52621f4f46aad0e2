package bearer

import (
	"errors"
	"fmt"

	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/fault"
)

// ErrExpired and ErrRevoked (both wrapping ErrInvalidToken) tell two refusals of an
// otherwise good token apart, for the operator's counts: it has expired, or its
// grant was revoked.
var (
	ErrExpired = fmt.Errorf("%w: the token has expired", ErrInvalidToken)
	ErrRevoked = fmt.Errorf("%w: the token was revoked", ErrInvalidToken)
)

// Decision is the outcome of a bearer decision (Check's result err), for the
// operator's counts: Allowed, Missing, Expired, Revoked, Invalid,
// InsufficientScope or Unavailable. It costs nothing on the admitted path.
func Decision(err error) event.Outcome {
	switch {
	case err == nil:
		return event.Allowed
	case errors.Is(err, ErrNoToken):
		return event.Missing
	case errors.Is(err, ErrExpired):
		return event.Expired
	case errors.Is(err, ErrRevoked):
		return event.Revoked
	case errors.Is(err, ErrInvalidToken):
		return event.Invalid
	case errors.Is(err, ErrIssuerUnavailable):
		return event.Unavailable
	}
	if f, ok := fault.As(err); ok {
		switch {
		case f.Code == CodeInsufficientScope:
			return event.InsufficientScope
		case f.Class == fault.Unavailable:
			return event.Unavailable
		}
	}
	return event.Invalid
}

package palm

import (
	"context"
	"errors"

	"github.com/palmgate/palmgate/core/event"
)

// emitEnd tells the sink how an assertion or a denial for a challenge went, once
// its transaction has committed (or failed): done with ok on success (c the
// challenge ended), else the outcome err stands for. A challenge that was not
// found, a wrong nonce and a failure of the server are no assertion's outcome:
// nothing is emitted for them.
func (s *Service) emitEnd(ctx context.Context, c *Challenge, err error, ok event.Outcome) {
	if s.events == nil {
		return
	}
	e := event.Event{Kind: event.PalmAssertion, Outcome: ok}
	switch {
	case err == nil:
		e.Purpose, e.HumanID = string(c.Purpose), c.HumanID
	case errors.Is(err, ErrBadAssertion), errors.Is(err, ErrMalformed):
		e.Outcome = event.Refused
	case errors.Is(err, ErrNotPending):
		e.Outcome = event.Replayed
	case errors.Is(err, ErrExpired), errors.Is(err, ErrScanLapsed):
		e.Outcome = event.Expired
	default:
		return
	}
	s.events(ctx, e)
}

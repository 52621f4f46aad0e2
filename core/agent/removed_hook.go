package agent

import (
	"context"
	"errors"
	"fmt"
)

// What a removal ends beyond the registry (issue 24): the grants that let the
// agent act for its human live in core/oidc, which the registry does not know.
// The app wiring hands the registry one hook (OnRemoved) that Remove and
// RemoveOwned call once the removal has committed, so that every way of
// removing an agent (the operator's admin API and CLI, the owner's agents page)
// ends them alike.
//
// The failure policy: the removal stands whatever the hook answers (it has
// committed; the agent is unregistered everywhere within RemovalMaxAge, here at
// once). A removed agent gets no new token anyway, since the token endpoint
// looks its key up in the registry (AgentKey answers none); what a failed hook
// leaves is its live tokens, which then expire within the access-token
// lifetime instead of being refused at once. So Remove then returns the removal
// together with an error wrapping ErrAfterRemoval: a caller reports the removal
// as done and logs the error.

// ErrAfterRemoval wraps the failure of the OnRemoved hook: the agent was
// removed (Remove returns it too), but what it held elsewhere was not released.
var ErrAfterRemoval = errors.New("the agent was removed, but ending what it held failed")

// RemovedHook is called once a removal has committed, with what it removed.
type RemovedHook func(ctx context.Context, r Removed) error

// OnRemoved sets the hook every removal calls after its commit (nil: none). Set
// it once, while wiring the services, before the registry serves requests.
func (s *Service) OnRemoved(fn RemovedHook) { s.onRemoved = fn }

// afterRemoval calls the hook for r, with a context that outlives the request's
// cancellation (the removal has committed: what follows it must run).
func (s *Service) afterRemoval(ctx context.Context, r *Removed) error {
	if s.onRemoved == nil {
		return nil
	}
	if err := s.onRemoved(context.WithoutCancel(ctx), *r); err != nil {
		return fmt.Errorf("%w: %w", ErrAfterRemoval, err)
	}
	return nil
}

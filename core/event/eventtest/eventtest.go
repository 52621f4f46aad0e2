// Package eventtest records the events a service emits, for tests.
package eventtest

import (
	"context"
	"sync"

	"github.com/palmgate/palmgate/core/event"
)

// Recorder keeps every event its Sink receives.
type Recorder struct {
	mu     sync.Mutex
	events []event.Event
}

// Sink is the sink to hand a service's Config.
func (r *Recorder) Sink() event.Sink {
	return func(_ context.Context, e event.Event) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.events = append(r.events, e)
	}
}

// Take returns the events received since the last Take, and forgets them.
func (r *Recorder) Take() []event.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

package event

import (
	"context"
	"regexp"
	"testing"
)

// TestOutcomeNames: every outcome has its own name, a valid Prometheus label
// value in snake case (None alone is ""), and a nil sink drops events.
func TestOutcomeNames(t *testing.T) {
	name := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	seen := map[string]Outcome{}
	for o := None + 1; o < NumOutcomes; o++ {
		n := o.String()
		if !name.MatchString(n) {
			t.Errorf("outcome %d has name %q", o, n)
		}
		if prev, dup := seen[n]; dup {
			t.Errorf("outcomes %d and %d share the name %q", prev, o, n)
		}
		seen[n] = o
	}
	if None.String() != "" || NumOutcomes.String() != "unknown" {
		t.Errorf("None %q, out of range %q", None.String(), NumOutcomes.String())
	}
	var s Sink
	s.Emit(context.Background(), Event{Kind: Login}) // no panic
	if Remote(WithRemote(context.Background(), "192.0.2.1")) != "192.0.2.1" || Remote(context.Background()) != "" {
		t.Error("WithRemote/Remote do not round-trip")
	}
}

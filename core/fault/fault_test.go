package fault

import (
	"errors"
	"fmt"
	"testing"

	"github.com/palmgate/palmgate/storage"
)

// TestAs: As finds the first fault in a chain; an error wrapping
// storage.ErrUnavailable is the Unavailable fault with StorageRetryAfter, still
// matching its cause; any other error is no fault.
func TestAs(t *testing.T) {
	kind := &Error{Class: NotFound, Code: "thing_not_found", Message: "no such thing"}
	of := Of(kind, "no thing %q", "x")
	if f, ok := As(fmt.Errorf("reading: %w", of)); !ok || f != of || f.Class != NotFound || f.Code != "thing_not_found" || !errors.Is(of, kind) {
		t.Errorf("As(wrapped Of) = %+v, %v", f, ok)
	}
	down := fmt.Errorf("pgstore: get on db:5432: %w: refused", storage.ErrUnavailable)
	f, ok := As(down)
	if !ok || f.Class != Unavailable || f.Code != CodeStorageUnavailable || f.RetryAfter != StorageRetryAfter || !errors.Is(f, storage.ErrUnavailable) {
		t.Errorf("As(store down) = %+v, %v", f, ok)
	}
	if f.Message != "the database is unavailable; retry later" {
		t.Errorf("store down message %q: the backend's text must not reach the client", f.Message)
	}
	if f2, _ := As(down); f2 == f || storageUnavailable.Kind != nil {
		t.Error("As(store down) shares its fault between calls")
	}
	if f, ok := As(errors.New("boom")); ok || f != nil {
		t.Errorf("As(boom) = %+v, %v; want no fault", f, ok)
	}
}

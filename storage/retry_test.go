package storage

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestBackoff: the pause stays within [Min/2, Min/2 + ceiling), the ceiling
// doubling per attempt up to Max.
func TestBackoff(t *testing.T) {
	b := Backoff{Min: time.Millisecond, Max: 8 * time.Millisecond}
	for attempt, ceiling := range map[int]time.Duration{1: time.Millisecond, 2: 2 * time.Millisecond, 4: 8 * time.Millisecond, 40: 8 * time.Millisecond} {
		for range 200 {
			if d := b.Before(attempt); d < b.Min/2 || d >= b.Min/2+ceiling {
				t.Fatalf("Before(%d) = %s, want in [%s, %s)", attempt, d, b.Min/2, b.Min/2+ceiling)
			}
		}
	}
}

// TestSleep: Sleep returns nil after its pause, and ctx's error at once when
// ctx ends first.
func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Microsecond); err != nil {
		t.Fatalf("Sleep = %v, want nil", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep with an ended context = %v, want context.Canceled", err)
	}
}

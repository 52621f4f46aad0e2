package caddymodule

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// watchers counts the goroutines running the key watcher (keys.(*Set).Watch).
func watchers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return strings.Count(string(buf), "core/keys.(*Set).Watch(")
}

// waitWatchers waits until want key watchers run (a goroutine ends a moment after
// its context does), failing after a bound a loaded machine meets.
func waitWatchers(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for watchers() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d key watcher goroutines run, want %d", watchers(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestProvisionStartsNoWork: Provision only builds; the key watcher runs from Start
// to Stop, so a provisioned config that is then discarded (Provision, Cleanup,
// never Start: what a failed reload or `caddy validate` does) leaves no goroutine
// behind, even while its caddy.Context lives on.
func TestProvisionStartsNoWork(t *testing.T) {
	before := watchers()
	newApp := func(t *testing.T) *App {
		t.Helper()
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		t.Cleanup(cancel)
		a := &App{Issuer: "http://localhost:9", Dev: true, Storage: &StorageConfig{Backend: "badger", Path: t.TempDir()}}
		if err := a.Provision(ctx); err != nil {
			t.Fatalf("Provision: %v", err)
		}
		return a
	}

	t.Run("provisioned then discarded", func(t *testing.T) {
		a := newApp(t)
		if n := watchers(); n != before {
			t.Errorf("after Provision, %d key watchers run, want %d: Provision started work", n, before)
		}
		if err := a.Cleanup(); err != nil {
			t.Fatalf("Cleanup: %v", err)
		}
		if n := watchers(); n != before {
			t.Errorf("after Cleanup without Start, %d key watchers run, want %d", n, before)
		}
	})

	t.Run("started then stopped", func(t *testing.T) {
		a := newApp(t)
		if err := a.Start(); err != nil {
			t.Fatalf("Start: %v", err)
		}
		waitWatchers(t, before+1)
		if err := a.Stop(); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if n := watchers(); n != before { // Stop waits for the watcher to end
			t.Errorf("after Stop, %d key watchers run, want %d", n, before)
		}
		if err := a.Cleanup(); err != nil {
			t.Fatalf("Cleanup: %v", err)
		}
	})
}

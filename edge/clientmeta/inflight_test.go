package clientmeta

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestFetchConcurrentOnce (review 3, finding 3): requests naming one document URL
// at the same time make one fetch between them, as the cache promises for
// requests one after the other ("once per URL per 10 s to 24 h"); before, each
// request that missed the cache fetched, so a burst of them (up to the rate
// limit) sent that many GETs to the URL's host at once.
func TestFetchConcurrentOnce(t *testing.T) {
	const callers = 10
	var hits atomic.Int32
	arrived := make(chan struct{}, callers)
	release := make(chan struct{})
	var calls atomic.Int32 // of the clock: each Fetch reads it first
	srv, f := docServer(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		jsonDoc(w, `{"client_id":"x"}`)
	}, Config{AllowPrivate: true, Now: func() time.Time { calls.Add(1); return time.Now() }})
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := f.Fetch(context.Background(), srv.URL+"/doc")
			if err == nil && string(b) != `{"client_id":"x"}` {
				t.Errorf("Fetch = %q", b)
			}
			errs <- err
		}()
	}
	<-arrived // one fetch is under way, and held
	for calls.Load() < callers {
		time.Sleep(time.Millisecond) // every caller is in Fetch, none answered
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Fetch: %v", err)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("%d concurrent requests made %d fetches; want 1", callers, n)
	}
}

// TestFetchOutlivesACallerGone: a caller that gives up gets its context's error
// at once; the fetch goes on for the others, and its answer is cached (a client
// that drops its requests cannot make every request a new fetch).
func TestFetchOutlivesACallerGone(t *testing.T) {
	var hits atomic.Int32
	arrived := make(chan struct{}, 4)
	release := make(chan struct{})
	srv, f := docServer(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		arrived <- struct{}{}
		<-release
		jsonDoc(w, `{"client_id":"x"}`)
	}, Config{AllowPrivate: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := f.Fetch(ctx, srv.URL+"/doc")
		done <- err
	}()
	<-arrived
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a caller that gave up got a document")
	}
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := f.Fetch(context.Background(), srv.URL+"/doc")
		if err == nil && string(b) == `{"client_id":"x"}` {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Fetch = %q, %v", b, err)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("%d fetches; want 1 (the one the first caller started)", n)
	}
}

package clientmeta

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// TestFetchBoundsTheHeaders (review 3, finding 7): the 5 KiB bound was the
// body's alone; the answer's header was read up to net/http's default of 10 MiB,
// so every fetch of a document URL on a hostile host could cost that much memory,
// and each request may name another URL. The header is bounded too.
func TestFetchBoundsTheHeaders(t *testing.T) {
	srv, f := docServer(t, func(w http.ResponseWriter, r *http.Request) {
		for i := range 64 {
			w.Header().Set("X-Filler-"+strings.Repeat("a", i%8+1)+string(rune('a'+i%26))+string(rune('a'+i/26)), strings.Repeat("x", 1024))
		}
		jsonDoc(w, `{}`)
	}, Config{AllowPrivate: true})
	if _, err := f.Fetch(context.Background(), srv.URL+"/doc"); err == nil {
		t.Fatal("a document answered with a 64 KiB header was accepted")
	}
	small, g := docServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=60")
		w.Header().Set("Server", strings.Repeat("s", 200))
		jsonDoc(w, `{}`)
	}, Config{AllowPrivate: true})
	if _, err := g.Fetch(context.Background(), small.URL+"/doc"); err != nil {
		t.Fatalf("an ordinary answer: %v", err)
	}
}

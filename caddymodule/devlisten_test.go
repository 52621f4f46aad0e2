package caddymodule

import (
	"reflect"
	"testing"
)

// TestExposedListeners: which listen addresses reach beyond loopback, where a
// dev mode palmgate must warn.
func TestExposedListeners(t *testing.T) {
	t.Setenv("PALMGATE_TEST_BIND", "127.0.0.1")
	for _, tc := range []struct {
		listen  string
		exposed bool
	}{
		{":8080", true}, // an empty host: every interface
		{"tcp/:8080", true},
		{"0.0.0.0:8080", true},
		{"[::]:8080", true},
		{"192.0.2.7:8080", true},
		{"id.example.com:443", true},
		{"not an address", true},
		{"127.0.0.1:8080", false},
		{"127.0.0.2:8080", false},
		{"[::1]:8080", false},
		{"localhost:8080", false},
		{"tcp4/127.0.0.1:8080", false},
		{"{env.PALMGATE_TEST_BIND}:8080", false},
		{"unix//run/palmgate.sock", false},
	} {
		t.Run(tc.listen, func(t *testing.T) {
			got := exposedListeners(map[string][]string{"srv0": {tc.listen}})
			if (len(got) > 0) != tc.exposed {
				t.Errorf("exposedListeners(%q) = %v, want exposed %v", tc.listen, got, tc.exposed)
			}
		})
	}
	// Every exposed listener of every server is named, in order; the automatic
	// HTTPS redirects serve no palmgate route.
	got := exposedListeners(map[string][]string{
		"srv1":             {"127.0.0.1:9000", ":9001"},
		"srv0":             {":8080", "0.0.0.0:8081"},
		autoHTTPSRedirects: {":80"},
	})
	want := []exposedListener{{"srv0", "0.0.0.0:8081"}, {"srv0", ":8080"}, {"srv1", ":9001"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("exposedListeners = %v, want %v", got, want)
	}
}

package oidc

import (
	"net/url"
	"testing"
)

// TestRedirectKeepsRegisteredQuery checks RFC 6749 3.1.2: the query of a
// registered redirect URI (and post-logout redirect URI) "MUST be retained when
// adding additional query parameters". Before the fix the query was parsed and
// re-encoded: a pair Go's parser refuses (a semicolon) was dropped, so the browser
// went to another URI than the registered one, and a bare key gained an '='.
func TestRedirectKeepsRegisteredQuery(t *testing.T) {
	for _, tc := range []struct{ uri, want, logout string }{
		{"https://app.example.test/cb", "https://app.example.test/cb?code=C&state=S", "https://app.example.test/cb?state=S"},
		{"https://app.example.test/cb?a=1;b=2", "https://app.example.test/cb?a=1;b=2&code=C&state=S", "https://app.example.test/cb?a=1;b=2&state=S"},
		{"https://app.example.test/cb?x&t=a%20b", "https://app.example.test/cb?x&t=a%20b&code=C&state=S", "https://app.example.test/cb?x&t=a%20b&state=S"},
		// A response parameter in the registered query is replaced, never doubled.
		{"https://app.example.test/cb?state=old&k=v", "https://app.example.test/cb?k=v&code=C&state=S", "https://app.example.test/cb?k=v&state=S"},
	} {
		if got := (&Redirect{URI: tc.uri, Code: "C", State: "S"}).URL(); got != tc.want {
			t.Errorf("Redirect to %s: %s, want %s", tc.uri, got, tc.want)
		}
		if got := (&Logout{RedirectURI: tc.uri, State: "S"}).URL(); got != tc.logout {
			t.Errorf("Logout to %s: %s, want %s", tc.uri, got, tc.logout)
		}
		if _, err := url.Parse(tc.want); err != nil {
			t.Fatal(err)
		}
	}
	if got := (&Logout{RedirectURI: "https://app.example.test/bye?a=1;b=2"}).URL(); got != "https://app.example.test/bye?a=1;b=2" {
		t.Errorf("Logout without state: %s, want the registered URI as it is", got)
	}
}

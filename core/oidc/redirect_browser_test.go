package oidc

import (
	"strings"
	"testing"
)

// TestBrowserHandOffSchemesRefused (fourth review): the schemes that open a web
// URL in a browser (x-safari-https://evil.example/ opens https://evil.example/)
// are not an app's own, so they are refused as a private-use redirect URI, with
// the same wording as the other refused schemes.
func TestBrowserHandOffSchemesRefused(t *testing.T) {
	for _, uri := range []string{
		"x-safari-https://evil.example/cb", "x-safari-http://evil.example/cb", "googlechrome://evil.example/cb",
		"googlechromes://evil.example/cb", "firefox://open-url?url=https://evil.example/cb", "opera-http://evil.example/cb",
		"opera-https://evil.example/cb", "microsoft-edge-https://evil.example/cb", "microsoft-edge-http://evil.example/cb",
		"web+mcp://evil.example/cb", "WEB+Foo:/cb", "Googlechrome://x/cb",
	} {
		err := CheckClientRedirectURI("redirect_uri", uri, true, true)
		if err == nil || !strings.Contains(err.Error(), "is not an app's own") {
			t.Errorf("%q: %v; want refused as not an app's own scheme", uri, err)
		}
	}
	// An app's own scheme that merely starts alike stays accepted.
	for _, uri := range []string{"webapp://cb/x", "firefoxsync.example:/cb", "com.opera.app:/cb"} {
		if err := CheckClientRedirectURI("redirect_uri", uri, true, true); err != nil {
			t.Errorf("%q: %v; want accepted", uri, err)
		}
	}
}

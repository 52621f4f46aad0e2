package edge_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestTokenErrorDescriptionCharset (third review): the token endpoint's JSON
// error_description keeps to RFC 6749 5.2's characters (%x20-21 / %x23-5B /
// %x5D-7E) when its message quotes the request (%q): a refresh that asks for a
// scope holding a double quote, a backslash and a non-ASCII letter.
func TestTokenErrorDescriptionCharset(t *testing.T) {
	e := newEnv(t)
	first := e.tokens(t, "alice")
	w := e.postForm(t, "/oauth2/token", url.Values{
		"grant_type": {"refresh_token"}, "refresh_token": {first["refresh_token"].(string)},
		"scope":     {`openid caf` + "\u00e9" + `"x\y`},
		"client_id": {testClientID}, "client_secret": {testSecret},
	}, nil)
	body := wantOAuthError(t, w, http.StatusBadRequest, "invalid_scope")
	desc, _ := body["error_description"].(string)
	if strings.IndexFunc(desc, func(r rune) bool { return r < 0x20 || r > 0x7e || r == '"' || r == '\\' }) >= 0 {
		t.Errorf("error_description %q, want only RFC 6749 5.2's characters", desc)
	}
	// As a redirect's: '"' is "'", '\' is '/', any other character '?'.
	if want := `scope 'caf?/'x//y' is not a valid scope token`; desc != want {
		t.Errorf("error_description %q, want %q", desc, want)
	}
}

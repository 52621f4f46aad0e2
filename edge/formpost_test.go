package edge

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
)

// TestFrameAncestorSource: the form_post page may be framed by an http(s)
// redirect URI's origin alone, and by nothing for any other redirect URI.
func TestFrameAncestorSource(t *testing.T) {
	for uri, want := range map[string]string{
		"https://app.example.com/silent?x=1":   "https://app.example.com",
		"http://127.0.0.1:8080/callback":       "http://127.0.0.1:8080",
		"https://user@app.example.com:8443/cb": "https://app.example.com:8443",
		"com.example.app:/oauth2redirect":      "'none'",
		"javascript:alert(1)":                  "'none'",
		"%zz":                                  "'none'",
	} {
		if got := frameAncestorSource(uri); got != want {
			t.Errorf("frameAncestorSource(%q) = %q, want %q", uri, got, want)
		}
	}
}

// TestFormPostScriptHash: the CSP hash is that of the script the page holds.
func TestFormPostScriptHash(t *testing.T) {
	var b strings.Builder
	if err := formPostPage.Execute(&b, struct {
		Action string
		Fields []formPostField
	}{Action: "https://app.example.com/cb", Fields: []formPostField{{"code", "c"}}}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	_, rest, _ := strings.Cut(page, "<script>")
	script, _, ok := strings.Cut(rest, "</script>")
	sum := sha256.Sum256([]byte(script))
	if !ok || formPostScriptHash != "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'" {
		t.Errorf("CSP source %s is not the hash of the page's script %q", formPostScriptHash, script)
	}
}

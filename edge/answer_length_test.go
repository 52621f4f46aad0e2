package edge_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// TestTokenAnswerHasContentLength: the token endpoint's answer is sent whole, with
// its Content-Length, not chunked. An answer with an RS256 ID token, an access and
// a refresh token is longer than net/http's 2 KiB pre-chunking buffer, so an
// answer written without a length goes out in chunks (issue 19: the exchange's
// non-signing cost).
func TestTokenAnswerHasContentLength(t *testing.T) {
	e := newEnv(t)
	srv := httptest.NewServer(e.srv)
	t.Cleanup(srv.Close)
	form := codeForm(e.code(t, "palm-length"))
	resp, err := srv.Client().Post(srv.URL+"/oauth2/token", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if len(body) <= 2048 {
		t.Fatalf("the answer is %d bytes: the test wants one longer than net/http's 2 KiB buffer", len(body))
	}
	if len(resp.TransferEncoding) != 0 || resp.Header.Get("Content-Length") != strconv.Itoa(len(body)) {
		t.Errorf("Transfer-Encoding %q, Content-Length %q for a %d-byte answer: want no chunks and the length",
			resp.TransferEncoding, resp.Header.Get("Content-Length"), len(body))
	}
	if !strings.HasSuffix(string(body), "}\n") {
		t.Errorf("the answer ends %q: want the JSON and a newline, as before", body[len(body)-2:])
	}
}

package testserver

import (
	"net/http"
	"strings"
	"testing"
)

// TestLogCaptureFindsLeaks: the check the log capture runs finds a planted
// value, a value a response carried and a JWT in a log, and fails the test that
// ran the server; a log without them passes.
func TestLogCaptureFindsLeaks(t *testing.T) {
	t.Cleanup(func() { // the leaks planted here are not the run's
		leaks.Lock()
		leaks.found = nil
		leaks.Unlock()
	})
	Sensitive("palm subject", "planted-palm-subject-4b1d")
	Sensitive("short", "alice") // too short to check
	recordSecrets("127.0.0.1:1", "grant_type=refresh_token&refresh_token=rt-planted-0123456789", &Response{
		Header: http.Header{"Location": {"https://app.example/cb?code=code-planted-abcdef&state=st"}},
		Body:   []byte(`{"access_token":"at-planted-0123456789","code":"invalid_request_error_code"}`),
	})
	for _, tc := range []struct {
		name, log string
		want      string // "" for no leak
	}{
		{"clean", `{"level":"info","msg":"login completed","client_id":"app","humanId":"h","remote":"127.0.0.1"} alice`, ""},
		{"palm subject", `{"msg":"x","sub":"planted-palm-subject-4b1d"}`, "palm subject"},
		{"refresh token sent", `refresh planted: rt-planted-0123456789`, "refresh_token"},
		{"code in a redirect", `{"uri":"/cb?code=code-planted-abcdef"}`, "the code"},
		{"access token in a response", `token at-planted-0123456789`, "access_token"},
		{"a JWT", `{"msg":"bad","token":"eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"}`, "a JWT"},
		{"an error code is no secret", `{"code":"invalid_request_error_code"}`, ""},
	} {
		found := Leaks(tc.log, "127.0.0.1:1")
		if tc.want == "" {
			if len(found) != 0 {
				t.Errorf("%s: leaks %v in a clean log", tc.name, found)
			}
			continue
		}
		if len(found) != 1 || !strings.Contains(found[0], tc.want) {
			t.Errorf("%s: leaks %v, want one naming %q", tc.name, found, tc.want)
		}
		f := &fakeTB{TB: t}
		done := make(chan struct{})
		go func() { defer close(done); CheckLog(f, "server x", tc.log, "127.0.0.1:1") }()
		<-done
		if !f.failed {
			t.Errorf("%s: CheckLog did not fail the test", tc.name)
		}
	}
	if found := Leaks(`token at-planted-0123456789`, "127.0.0.1:2"); len(found) != 0 {
		t.Errorf("another server's log is checked for this server's values: %v", found)
	}
	if _, leaked := leakReport(); !leaked {
		t.Error("Main's report is empty after leaks")
	}
}

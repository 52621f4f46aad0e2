package testserver

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
)

// The log capture: every server's log is checked, when its test ends, for the
// secrets the tests handled: planted values (Sensitive: client secrets, pairwise
// secrets, palm subjects) and every token, code and secret a response carried
// (Do records them), and for anything shaped like a JWT. A hit fails the test
// that ran the server, and Main fails the run, so that a full run of the
// integration suite proves that no secret, token, code or palm subject reaches a
// log line. With $PALMGATE_LOG_CAPTURE set to a directory, every server's log is
// also kept there, one file per server.

// minSensitiveLen is the shortest value checked: a shorter one (a test's "alice")
// could match innocent text.
const minSensitiveLen = 12

// jwtRE is a compact JWS or JWE: no log line may hold one.
var jwtRE = regexp.MustCompile(`eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`)

var leaks struct {
	sync.Mutex
	values map[string]string // value -> what it is
	found  []string
	logs   int
}

// Sensitive registers values (of at least 12 characters; shorter ones are
// ignored) that no server log may contain, with what they are ("client secret").
func Sensitive(what string, values ...string) {
	leaks.Lock()
	defer leaks.Unlock()
	if leaks.values == nil {
		leaks.values = map[string]string{}
	}
	for _, v := range values {
		if len(v) >= minSensitiveLen {
			leaks.values[v] = what
		}
	}
}

// Leaks returns a description of each sensitive value, and of each JWT, that
// text contains.
func Leaks(text string) []string {
	leaks.Lock()
	values := make(map[string]string, len(leaks.values))
	for v, what := range leaks.values {
		values[v] = what
	}
	leaks.Unlock()
	var out []string
	for v, what := range values {
		if i := strings.Index(text, v); i >= 0 {
			out = append(out, fmt.Sprintf("%s %q in line %q", what, v, lineAt(text, i)))
		}
	}
	for _, m := range jwtRE.FindAllStringIndex(text, 5) {
		out = append(out, fmt.Sprintf("a JWT in line %q", lineAt(text, m[0])))
	}
	sort.Strings(out)
	return out
}

func lineAt(text string, i int) string {
	start := strings.LastIndexByte(text[:i], '\n') + 1
	end := strings.IndexByte(text[i:], '\n')
	if end < 0 {
		end = len(text) - i
	}
	return tail(text[start:i+end], 400)
}

// CheckLog fails t for each leak (see Leaks) in the log text named name, and
// records it for Main; with $PALMGATE_LOG_CAPTURE set, it keeps the log there.
func CheckLog(t testing.TB, name, text string) {
	t.Helper()
	found := Leaks(text)
	leaks.Lock()
	leaks.logs++
	n := leaks.logs
	for _, f := range found {
		leaks.found = append(leaks.found, t.Name()+": "+name+": "+f)
	}
	leaks.Unlock()
	for _, f := range found {
		t.Errorf("log capture: the log of %s holds %s", name, f)
	}
	if dir := os.Getenv("PALMGATE_LOG_CAPTURE"); dir != "" {
		file := filepath.Join(dir, fmt.Sprintf("%05d-%s.log", n, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())))
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Errorf("log capture: %v", err)
		}
	}
}

// leakReport is the summary Main prints: every leak found in the run.
func leakReport() (string, bool) {
	leaks.Lock()
	defer leaks.Unlock()
	if len(leaks.found) == 0 {
		return "", false
	}
	return fmt.Sprintf("log capture: %d leak(s) in the logs of %d server runs:\n\t%s",
		len(leaks.found), leaks.logs, strings.Join(leaks.found, "\n\t")), true
}

// secretFields are the fields of JSON bodies, forms and redirects that hold a
// secret, a token or a code.
var secretFields = []string{"access_token", "refresh_token", "id_token", "client_secret", "code", "palmSubject", "assertion", "registration_access_token"}

// recordSecrets registers the secrets a request body and its response carry.
func recordSecrets(reqBody any, resp *Response) {
	switch b := reqBody.(type) {
	case string:
		recordForm(b)
	case []byte:
		recordJSON(b)
	case nil:
	default:
		if data, err := json.Marshal(b); err == nil {
			recordJSON(data)
		}
	}
	recordJSON(resp.Body)
	if loc := resp.Header.Get("Location"); loc != "" {
		if u, err := url.Parse(loc); err == nil {
			recordValues(u.Query())
		}
	}
}

// hiddenInputRE is a hidden form field of a form_post answer.
var hiddenInputRE = regexp.MustCompile(`name="([a-z_]+)" value="([^"]*)"`)

func recordJSON(data []byte) {
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		q := url.Values{}
		for _, sm := range hiddenInputRE.FindAllSubmatch(data, -1) {
			q.Add(string(sm[1]), string(sm[2]))
		}
		recordValues(q)
		return
	}
	for _, f := range secretFields {
		if f == "code" { // in JSON, an error's code; a code comes in a redirect or a form
			continue
		}
		if s, ok := m[f].(string); ok {
			Sensitive("the "+f+" of a request or response", s)
		}
	}
}

func recordForm(body string) {
	if q, err := url.ParseQuery(body); err == nil {
		recordValues(q)
	}
}

func recordValues(q url.Values) {
	for _, f := range secretFields {
		for _, v := range q[f] {
			Sensitive("the "+f+" of a request or response", v)
		}
	}
}

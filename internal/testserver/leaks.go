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
	// values maps each value to what it is, by the host:port whose requests or
	// responses carried it ("" for the planted ones, which every log is checked
	// for): a server's log is checked for its own values, which keeps the check
	// of a whole suite's logs linear.
	values map[string]map[string]string
	found  []string
	logs   int
}

// Sensitive registers values (of at least 12 characters; shorter ones are
// ignored) that no server log may contain, with what they are ("client secret").
func Sensitive(what string, values ...string) { sensitiveAt("", what, values...) }

func sensitiveAt(host, what string, values ...string) {
	leaks.Lock()
	defer leaks.Unlock()
	if leaks.values == nil {
		leaks.values = map[string]map[string]string{}
	}
	m := leaks.values[host]
	if m == nil {
		m = map[string]string{}
		leaks.values[host] = m
	}
	for _, v := range values {
		if len(v) >= minSensitiveLen {
			m[v] = what
		}
	}
}

// Leaks returns a description of each sensitive value, and of each JWT, that
// text contains: the planted values and those the requests to hosts (host:port)
// and their responses carried.
func Leaks(text string, hosts ...string) []string {
	leaks.Lock()
	values := map[string]string{}
	for _, h := range append([]string{""}, hosts...) {
		for v, what := range leaks.values[h] {
			values[v] = what
		}
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

// CheckLog fails t for each leak (see Leaks) in the log text named name, of a
// server at hosts (its site's and its admin endpoint's host:port), and records it
// for Main; with $PALMGATE_LOG_CAPTURE set, it keeps the log there.
func CheckLog(t testing.TB, name, text string, hosts ...string) {
	t.Helper()
	found := Leaks(text, hosts...)
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

// recordSecrets registers the secrets a request to host and its response carry.
func recordSecrets(host string, reqBody any, resp *Response) {
	switch b := reqBody.(type) {
	case string:
		recordForm(host, b)
	case []byte:
		recordJSON(host, b)
	case nil:
	default:
		if data, err := json.Marshal(b); err == nil {
			recordJSON(host, data)
		}
	}
	recordJSON(host, resp.Body)
	if loc := resp.Header.Get("Location"); loc != "" {
		if u, err := url.Parse(loc); err == nil {
			recordValues(host, u.Query())
		}
	}
}

// hiddenInputRE is a hidden form field of a form_post answer.
var hiddenInputRE = regexp.MustCompile(`name="([a-z_]+)" value="([^"]*)"`)

func recordJSON(host string, data []byte) {
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		q := url.Values{}
		for _, sm := range hiddenInputRE.FindAllSubmatch(data, -1) {
			q.Add(string(sm[1]), string(sm[2]))
		}
		recordValues(host, q)
		return
	}
	for _, f := range secretFields {
		if f == "code" { // in JSON, an error's code; a code comes in a redirect or a form
			continue
		}
		if s, ok := m[f].(string); ok {
			sensitiveAt(host, "the "+f+" of a request or response", s)
		}
	}
}

func recordForm(host, body string) {
	if q, err := url.ParseQuery(body); err == nil {
		recordValues(host, q)
	}
}

func recordValues(host string, q url.Values) {
	for _, f := range secretFields {
		for _, v := range q[f] {
			sensitiveAt(host, "the "+f+" of a request or response", v)
		}
	}
}

// Hosts are the host:port of the server's site and admin endpoint, under which
// the log capture keeps the secrets their requests and responses carried.
func (s *Server) Hosts() []string {
	return []string{strings.TrimPrefix(s.URL, "http://"), s.AdminAddr}
}

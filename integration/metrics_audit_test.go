package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

// Issue 20: palmgate's metrics on Caddy's admin /metrics, its audit log on the
// palmgate.audit logger, and the log capture that proves no log holds a secret.

// bearerSite is a site with palmgate and a route /api/* that palmgate_bearer
// protects (answering "ok" itself: no upstream needed).
const bearerSite = "route /api/* {\npalmgate_bearer\nrespond \"ok\" 200\n}\npalmgate"

// scrapeDomain reads the palmgate_* series of the admin endpoint's /metrics, keyed by
// name and labels as exposed (`palmgate_logins_total{outcome="started"}`).
func scrapeDomain(t *testing.T, e *env) map[string]float64 {
	t.Helper()
	resp := testserver.Do(t, "GET", "http://"+e.AdminAddr+"/metrics", nil).ExpectStatus(t, http.StatusOK)
	series := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(resp.Body)))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "palmgate_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		series[line[:i]] = v
	}
	return series
}

// domainFamilies are the counters of palmgate's domain events (caddymodule's
// metrics.go); the store's own metrics (latency, retries, gauges) move with
// every request and are not this test's.
var domainFamilies = []string{"palmgate_logins_total", "palmgate_palm_assertions_total",
	"palmgate_tokens_issued_total", "palmgate_refresh_reuse_detected_total", "palmgate_codes_reused_total",
	"palmgate_agent_registrations_total", "palmgate_signature_checks_total", "palmgate_bearer_decisions_total",
	"palmgate_logouts_total", "palmgate_client_changes_total", "palmgate_agents_removed_total", "palmgate_key_rotations_total"}

// domainSeries reports whether series (name{labels}) is of a domain family.
func domainSeries(series string) bool {
	name, _, _ := strings.Cut(series, "{")
	return slices.Contains(domainFamilies, name)
}

// expectDeltas checks that every series of the domain families moved from before
// to after by exactly want's delta (0 for a series want does not name), and that
// every family is exposed.
func expectDeltas(t *testing.T, before, after map[string]float64, want map[string]float64) {
	t.Helper()
	for _, f := range domainFamilies {
		found := false
		for series := range after {
			if name, _, _ := strings.Cut(series, "{"); name == f {
				found = true
			}
		}
		if !found {
			t.Errorf("/metrics has no %s series", f)
		}
	}
	for name, d := range want {
		if _, ok := after[name]; !ok {
			t.Errorf("series %s is missing from /metrics", name)
		} else if got := after[name] - before[name]; got != d {
			t.Errorf("%s moved by %v, want %v", name, got, d)
		}
	}
	for name, v := range after {
		if _, ok := want[name]; !ok && domainSeries(name) && v != before[name] {
			t.Errorf("%s moved by %v, want 0", name, v-before[name])
		}
	}
}

// TestMetricsCountExactly: the admin endpoint's /metrics, beside caddy_http_*,
// counts a login, an agent registration, two signature checks, a refused (and
// an admitted) bearer token and a refresh token's reuse exactly: each counter moves by what was done
// and every other palmgate series stays where it was.
func TestMetricsCountExactly(t *testing.T) {
	c := newOIDCClient("rp-"+randHex(4), "")
	e := start(t, testserver.Options{Global: "rate_limit off\n" + c.config(), Site: bearerSite})
	before := scrapeDomain(t, e)
	if len(before) == 0 {
		t.Fatal("/metrics has no palmgate series before any request")
	}

	tok := e.tokensFor(t, c, e.subject("metrics"), "openid offline_access")
	ag := newAgent(t, "metrics-agent")
	e.register(t, ag, e.subject("owner"))
	e.do(t, "POST", "/v1/agent/verify/signature", ag.sign("hello", 1)).ExpectStatus(t, http.StatusOK)
	bad := ag.sign("hello", 1)
	bad["message"] = "hello!"
	e.do(t, "POST", "/v1/agent/verify/signature", bad).ExpectStatus(t, http.StatusOK)
	e.do(t, "GET", "/api/orders", nil, "Authorization", "Bearer not-a-token").ExpectStatus(t, http.StatusUnauthorized)
	e.do(t, "GET", "/api/orders", nil, "Authorization", "Bearer "+tok.access).ExpectStatus(t, http.StatusOK)
	e.refresh(t, c, tok.refresh).ExpectStatus(t, http.StatusOK)
	expectOAuthError(t, e.refresh(t, c, tok.refresh), http.StatusBadRequest, "invalid_grant")

	after := scrapeDomain(t, e)
	expectDeltas(t, before, after, map[string]float64{
		`palmgate_logins_total{outcome="started"}`:                      1,
		`palmgate_logins_total{outcome="completed"}`:                    1,
		`palmgate_palm_assertions_total{outcome="verified"}`:            2, // the login and the registration
		`palmgate_tokens_issued_total{grant_type="authorization_code"}`: 1,
		`palmgate_tokens_issued_total{grant_type="refresh_token"}`:      1,
		`palmgate_refresh_reuse_detected_total`:                         1,
		`palmgate_agent_registrations_total{outcome="started"}`:         1,
		`palmgate_agent_registrations_total{outcome="verified"}`:        1,
		`palmgate_signature_checks_total{result="registered"}`:          1,
		`palmgate_signature_checks_total{result="bad_signature"}`:       1,
		`palmgate_bearer_decisions_total{outcome="invalid"}`:            1,
		`palmgate_bearer_decisions_total{outcome="allowed"}`:            1,
	})
	body := string(testserver.Do(t, "GET", "http://"+e.AdminAddr+"/metrics", nil).Body)
	if !strings.Contains(body, "caddy_admin_http_requests_total") {
		t.Error("/metrics has no caddy_admin_http_requests_total: palmgate's series are not on Caddy's registry")
	}
	if strings.Contains(body, c.id) {
		t.Errorf("/metrics names the client %q: a label carries a client's string", c.id)
	}
}

// caddyfile is a Caddyfile for testserver.Options.Caddyfile: logs are the
// global `log` blocks, palmgate the lines of the palmgate block (beside issuer,
// storage, dev and rate_limit off), site the site's directives.
func caddyfile(logs, palmgate, site string) string {
	return fmt.Sprintf(`{
	admin 127.0.0.1:{adminport}
	persist_config off
	%s
	palmgate {
		issuer http://127.0.0.1:{port}
		storage badger {datadir}/palmgate
		dev
		rate_limit off
		%s
	}
}
http://127.0.0.1:{port} {
	%s
}
`, logs, palmgate, site)
}

// auditLogs route the palmgate.audit logger to a file of its own with Caddy's
// `log` global option, and keep it out of the default log.
const auditLogs = `log audit {
		output file {datadir}/audit.log
		format json
		include palmgate.audit
	}
	log default {
		exclude palmgate.audit
	}`

// auditEntry is one line of the audit log.
type auditEntry map[string]any

// readAudit waits until the audit log holds an entry with each of msgs (in any
// order) and returns its entries.
func readAudit(t *testing.T, path string, msgs ...string) []auditEntry {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		var entries []auditEntry
		seen := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if line == "" {
				continue
			}
			var e auditEntry
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("audit log line %q is not JSON: %v", line, err)
			}
			entries = append(entries, e)
			seen[str(e["msg"])] = true
		}
		missing := ""
		for _, m := range msgs {
			if !seen[m] {
				missing = m
			}
		}
		if missing == "" {
			return entries
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit log has no %q entry after 10s:\n%s", missing, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// findAudit returns the entries with msg.
func findAudit(entries []auditEntry, msg string) []auditEntry {
	var out []auditEntry
	for _, e := range entries {
		if str(e["msg"]) == msg {
			out = append(out, e)
		}
	}
	return out
}

// TestAuditLogToItsOwnFile: a login, a client created and deleted through the
// admin API and a refresh token's reuse each write an entry on the
// palmgate.audit logger with its stable msg and fields (client_id, humanId,
// outcome, remote), and a Caddyfile `log` block routes them to a file of their
// own, out of the default log.
func TestAuditLogToItsOwnFile(t *testing.T) {
	c := newOIDCClient("audited", "")
	e := start(t, testserver.Options{Caddyfile: caddyfile(auditLogs, c.config(), "palmgate")})
	auditPath := filepath.Join(e.DataDir, "audit.log")

	tok := e.tokensFor(t, c, e.subject("audit"), "openid offline_access")
	e.refresh(t, c, tok.refresh).ExpectStatus(t, http.StatusOK)
	expectOAuthError(t, e.refresh(t, c, tok.refresh), http.StatusBadRequest, "invalid_grant")
	dyn, _ := e.adminCreate(t, map[string]any{"name": "Audited Dynamic", "redirect_uris": []string{"https://dyn.example/cb"}})
	testserver.Do(t, "DELETE", "http://"+e.AdminAddr+"/palmgate/clients/"+dyn.id, nil, "Origin", "http://"+e.AdminAddr).
		ExpectStatus(t, http.StatusNoContent)

	// The operator's own events (fourth review: an agent removed through the
	// admin API was audited with an empty remote).
	ag := newAgent(t, "audited-agent")
	e.register(t, ag, e.subject("audit-owner"))
	testserver.Do(t, "DELETE", "http://"+e.AdminAddr+"/palmgate/agents/"+ag.deviceID, nil).ExpectStatus(t, http.StatusOK)
	testserver.Do(t, "POST", "http://"+e.AdminAddr+"/palmgate/keys/rotate", nil).ExpectStatus(t, http.StatusOK)
	testserver.Do(t, "GET", "http://"+e.AdminAddr+"/palmgate/backup", nil).ExpectStatus(t, http.StatusOK)

	entries := readAudit(t, auditPath, "login started", "login completed", "tokens issued",
		"refresh token reuse detected", "client created", "client deleted", "agent removed", "signing keys rotated", "backup taken")
	for _, en := range entries {
		if str(en["logger"]) != "palmgate.audit" || str(en["level"]) != "info" {
			t.Errorf("audit entry %v: want level info on logger palmgate.audit", en)
		}
		for _, f := range []string{"client_id", "humanId", "outcome", "remote"} {
			if _, ok := en[f]; !ok {
				t.Errorf("audit entry %v has no field %s", en, f)
			}
		}
	}
	completed := findAudit(entries, "login completed")
	if len(completed) != 1 {
		t.Fatalf("%d login completed entries, want 1: %v", len(completed), entries)
	}
	humanID := str(completed[0]["humanId"])
	for _, w := range []struct {
		msg, clientID, humanID, outcome, remote string
		n                                       int
	}{
		{"login started", c.id, "", "started", "127.0.0.1", 1},
		{"login completed", c.id, humanID, "completed", "127.0.0.1", 1},
		{"tokens issued", c.id, humanID, "", "127.0.0.1", 2},
		{"refresh token reuse detected", c.id, humanID, "revoked", "127.0.0.1", 1},
		{"client created", dyn.id, "", "", "127.0.0.1", 1},
		{"client deleted", dyn.id, "", "", "127.0.0.1", 1},
		{"agent removed", "", str(findAudit(entries, "agent removed")[0]["humanId"]), "", "127.0.0.1", 1},
		{"signing keys rotated", "", "", "manual", "127.0.0.1", 1},
		{"backup taken", "", "", "", "127.0.0.1", 1},
	} {
		got := findAudit(entries, w.msg)
		if len(got) != w.n {
			t.Errorf("%d %q entries, want %d", len(got), w.msg, w.n)
			continue
		}
		en := got[0]
		if str(en["client_id"]) != w.clientID || str(en["humanId"]) != w.humanID || str(en["remote"]) != w.remote ||
			(w.outcome != "" && str(en["outcome"]) != w.outcome) {
			t.Errorf("%q entry %v: want client_id %q humanId %q outcome %q remote %q", w.msg, en, w.clientID, w.humanID, w.outcome, w.remote)
		}
	}
	if !uuidRE.MatchString(humanID) {
		t.Errorf("login completed humanId %q is not a uuid", humanID)
	}
	grants := map[string]bool{}
	for _, en := range findAudit(entries, "tokens issued") {
		grants[str(en["outcome"])] = true
	}
	if !grants["authorization_code"] || !grants["refresh_token"] {
		t.Errorf("tokens issued outcomes %v, want authorization_code and refresh_token", grants)
	}
	if strings.Contains(e.Log(), "palmgate.audit") {
		t.Errorf("the default log holds audit entries although the Caddyfile excludes them:\n%s", e.Log())
	}
	b, _ := os.ReadFile(auditPath)
	testserver.CheckLog(t, "audit log", string(b), e.Hosts()...)
}

// TestLogCapturePlanted plants known secrets (a client secret and a pairwise
// secret in the config, a palm subject), runs a login, a code exchange, a
// refresh, a refresh reuse, a reused code, a wrong client secret, userinfo, a
// bearer route and a logout with the server logging at DEBUG, and the log
// capture (testserver's check of every server log, which Main turns into the
// run's failure) finds none of them, nor the code, the tokens and the hint the
// responses carried, in the log. It also proves that the capture knew them.
func TestLogCapturePlanted(t *testing.T) {
	c := newOIDCClient("planted", "")
	pairwise := "planted-pairwise-secret-" + randHex(16)
	testserver.Sensitive("pairwise secret", pairwise)
	// Every logger at DEBUG, and the site's access log as Caddyfile.example
	// configures it (an access log without its filters logs the codes of the
	// Location header and the hints of URIs: the README says so).
	e := start(t, testserver.Options{Caddyfile: caddyfile("log default {\n\t\tlevel DEBUG\n\t}",
		"pairwise_secret "+pairwise+"\n"+c.config(), exampleAccessLog(t)+"\n"+bearerSite)})

	subject := e.subject("planted")
	code := e.codeWithScope(t, c, subject, "openid offline_access")
	tok := e.redeem(t, c, code)
	expectOAuthError(t, e.postToken(t, map[string][]string{"grant_type": {"authorization_code"}, "code": {code},
		"redirect_uri": {c.redirects[0]}, "client_id": {c.id}, "client_secret": {c.secret}}), http.StatusBadRequest, "invalid_grant")
	tok2 := e.tokensFor(t, c, subject, "openid offline_access")
	e.refresh(t, c, tok2.refresh).ExpectStatus(t, http.StatusOK)
	expectOAuthError(t, e.refresh(t, c, tok2.refresh), http.StatusBadRequest, "invalid_grant")
	expectOAuthError(t, e.postToken(t, map[string][]string{"grant_type": {"refresh_token"}, "refresh_token": {tok2.refresh},
		"client_id": {c.id}, "client_secret": {c.secret + "x"}}), http.StatusUnauthorized, "invalid_client")
	tok3 := e.tokensFor(t, c, subject, "openid")
	e.userinfo(t, tok3.access).ExpectStatus(t, http.StatusOK)
	e.do(t, "GET", "/api/x", nil, "Authorization", "Bearer "+tok3.access).ExpectStatus(t, http.StatusOK)
	e.do(t, "GET", "/api/x", nil, "Authorization", "Bearer "+tok.access).ExpectStatus(t, http.StatusUnauthorized)
	e.do(t, "GET", "/oauth2/logout?id_token_hint="+tok3.id, nil)
	testserver.Sensitive("ID token hint", tok3.id)

	// The capture knows every planted value and every value the responses carried.
	for what, v := range map[string]string{"client secret": c.secret, "pairwise secret": pairwise, "palm subject": subject,
		"code": code, "access token": tok.access, "refresh token": tok2.refresh, "ID token": tok3.id} {
		if len(testserver.Leaks("x "+v+" x", e.Hosts()...)) == 0 {
			t.Errorf("the log capture does not look for the %s %q", what, v)
		}
	}
	e.Stop()
	if !strings.Contains(e.Log(), `"level":"debug"`) {
		t.Errorf("the server logged nothing at DEBUG: the capture saw less than every level")
	}
	testserver.CheckLog(t, "server "+e.URL+" (logging at DEBUG)", e.Log(), e.Hosts()...)
}

// exampleAccessLog is the site's `log` block of Caddyfile.example, with its
// filters.
func exampleAccessLog(t *testing.T) string {
	t.Helper()
	cf := exampleCaddyfile(t)
	i := strings.Index(cf, "\tlog {\n")
	j := strings.Index(cf, "\n\tpalmgate\n")
	if i < 0 || j < i {
		t.Fatal("Caddyfile.example has no site log block before palmgate: update this test")
	}
	return cf[i:j]
}

package integration

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

// pendingSpan is how long a login counts against the pending caps: its lifetime
// (10m) plus the 10 minutes its record is kept past it.
const pendingSpan = 20 * time.Minute

// networkCapCaddyfile trusts the loopback proxy's X-Forwarded-For, so that one
// test can be clients of many networks, and caps pending logins and registrations
// at 5, 2 per network.
func networkCapCaddyfile(app oidcClient) string {
	return `{
	admin 127.0.0.1:{adminport}
	persist_config off
	servers {
		trusted_proxies static 127.0.0.0/8
	}
	palmgate {
		issuer http://127.0.0.1:{port}
		storage badger {datadir}/palmgate
		dev
		rate_limit 1000 1m
		max_pending_logins 5 {
			per_network 2
		}
		max_pending_registrations 5 {
			per_network 2
		}
` + app.config() + `
	}
}
http://127.0.0.1:{port} {
	palmgate
}
`
}

// expectRetryAfter checks that r's Retry-After is whole seconds from 1 to
// most.
func expectRetryAfter(t *testing.T, r *testserver.Response, most time.Duration) {
	t.Helper()
	s := r.Header.Get("Retry-After")
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || time.Duration(n)*time.Second > most {
		t.Errorf("%s: Retry-After %q, want whole seconds from 1 to %d", r.Request, s, int(most.Seconds()))
	}
}

// TestLimitsPendingPerNetwork: through the real binary, behind a trusted proxy,
// a network (IPv4 /24, IPv6 /48) at its cap of pending logins or registrations
// gets 429 with a Retry-After no longer than the time until its oldest lapses,
// stores nothing, and does not stop other networks; only when the global cap
// is full do they get 503, again with a Retry-After within that time.
func TestLimitsPendingPerNetwork(t *testing.T) {
	t.Parallel()
	app := newOIDCClient("net-app", "")
	e := start(t, testserver.Options{Caddyfile: networkCapCaddyfile(app)})
	login := func(ip string) *testserver.Response {
		return e.do(t, "GET", e.authURL(app), nil, "X-Forwarded-For", ip)
	}
	for _, ip := range []string{"198.51.100.1", "198.51.100.2", "2001:db8:1:1::1", "2001:db8:1:2::1"} {
		login(ip).ExpectStatus(t, http.StatusFound)
	}
	before := storeCounts(t, e)
	for _, ip := range []string{"198.51.100.250", "2001:db8:1:ffff::9"} {
		r := login(ip)
		expectOAuthError(t, r, http.StatusTooManyRequests, "temporarily_unavailable")
		expectRetryAfter(t, r, pendingSpan)
	}
	if after := storeCounts(t, e); after["oidc/ar"] != before["oidc/ar"] || after["palm/c"] != before["palm/c"] {
		t.Errorf("records after the refusals: %v, want %v", after, before)
	}
	login("203.0.113.1").ExpectStatus(t, http.StatusFound) // another /24: the fifth login
	full := login("2001:db8:2::1")                         // another /48, but the global cap is full
	expectOAuthError(t, full, http.StatusServiceUnavailable, "temporarily_unavailable")
	expectRetryAfter(t, full, pendingSpan)

	register := func(ip string) *testserver.Response {
		return e.do(t, "POST", "/v1/agent/register/init", newAgent(t, "net-"+strings.NewReplacer(".", "-", ":", "-").Replace(ip)).registration(time.Now()), "X-Forwarded-For", ip)
	}
	for _, ip := range []string{"198.51.100.1", "198.51.100.77"} {
		register(ip).ExpectStatus(t, http.StatusCreated)
	}
	refused := register("198.51.100.3")
	refused.ExpectError(t, http.StatusTooManyRequests, "too_many_pending_from_network", "")
	expectRetryAfter(t, refused, registrationSpan)
	register("198.51.101.3").ExpectStatus(t, http.StatusCreated)
}

// registrationSpan is how long a registration counts: the session's default
// lifetime (15m) plus 10 minutes.
const registrationSpan = 25 * time.Minute

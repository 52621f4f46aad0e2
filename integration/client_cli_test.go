package integration

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/palmgate/palmgate/internal/testserver"
)

// cliClient is a client as `caddy palmgate client ... --json` prints it.
type cliClient struct {
	ID             string   `json:"client_id"`
	Secret         string   `json:"client_secret"`
	Name           string   `json:"name"`
	RedirectURIs   []string `json:"redirect_uris"`
	Sector         string   `json:"sector"`
	Static         bool     `json:"static"`
	PreviousExpiry string   `json:"previous_secret_expires_at"`
	Secrets        []struct {
		Current   bool      `json:"current"`
		ExpiresAt time.Time `json:"expires_at"`
	} `json:"secrets"`
}

// cli runs `caddy palmgate client <args> --address <admin>` and fails the test
// unless it succeeds.
func (e *env) cli(t *testing.T, args ...string) string {
	t.Helper()
	out, err := e.cliErr(t, args...)
	if err != nil {
		t.Fatalf("caddy palmgate client %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (e *env) cliErr(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return e.RunCommand(t, append(append([]string{"palmgate", "client"}, args...), "--address", e.AdminAddr)...)
}

func (e *env) cliJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out := e.cli(t, append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("caddy palmgate client %s --json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// authenticates reports whether the token endpoint's client authentication
// accepts id and secret (an introspection of a junk token answers 200
// active:false to an authenticated client, 401 otherwise).
func (e *env) authenticates(t *testing.T, id, secret string) bool {
	t.Helper()
	resp := e.do(t, "POST", "/oauth2/introspect", url.Values{"token": {"junk"}}.Encode(),
		"Content-Type", "application/x-www-form-urlencoded", "Authorization", basicAuth(id, secret))
	switch resp.Status {
	case http.StatusOK:
		return true
	case http.StatusUnauthorized:
		return false
	}
	t.Fatalf("introspect as %s: status %d %s", id, resp.Status, resp.Body)
	return false
}

// waitUntil polls cond until it holds, failing the test when a cond begun d or
// more after the call does not: the bound is on when the check starts, not on
// how fast a loaded machine answers it.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		began := time.Now()
		if cond() {
			return
		}
		if began.After(deadline) {
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestClientCLI runs every `caddy palmgate client` subcommand against a running
// server, and logs a user in to a client it created with go-oidc.
func TestClientCLI(t *testing.T) {
	t.Parallel()
	static := newOIDCClient("static-app", "")
	e := startOIDC(t, []oidcClient{static})
	redirect := "https://cli-app.example/callback"

	var added cliClient
	e.cliJSON(t, &added, "add", "--name", "CLI App", "--redirect-uri", redirect, "--redirect-uri", "http://localhost:7777/cb")
	if !strings.HasPrefix(added.ID, "pg_") || len(added.Secret) != 43 || added.Name != "CLI App" || len(added.RedirectURIs) != 2 || added.Sector != added.ID {
		t.Fatalf("client add --json = %+v", added)
	}

	// A user logs in to it with go-oidc and x/oauth2.
	c := oidcClient{id: added.ID, secret: added.Secret, redirects: []string{redirect}}
	rp := newRelyingParty(t, e, c, oauth2.AuthStyleInHeader, "openid", "offline_access")
	l := rp.login(t, e, e.subject("cli-user"))
	tok, err := rp.conf.Exchange(rp.ctx, l.code, oauth2.VerifierOption(l.verifier))
	if err != nil {
		t.Fatalf("exchanging a code of the CLI's client: %v", err)
	}
	idt, _ := rp.verifyIDToken(t, tok, l.nonce, l.scanned)
	e.expectUserinfo(t, tok.AccessToken, idt.Subject)

	// list: a table with both, static marked; --json the same clients.
	table := e.cli(t, "list")
	for _, want := range []string{"CLIENT_ID", added.ID, "CLI App", "dynamic", "static-app", "static", "palmgate-portal"} {
		if !strings.Contains(table, want) {
			t.Errorf("client list lacks %q:\n%s", want, table)
		}
	}
	var all []cliClient
	e.cliJSON(t, &all, "list")
	kinds := map[string]bool{}
	for _, c := range all {
		kinds[c.ID] = c.Static
	}
	if st, ok := kinds["static-app"]; !ok || !st || kinds[added.ID] || len(all) != 3 {
		t.Errorf("client list --json = %+v", all)
	}
	var shown cliClient
	e.cliJSON(t, &shown, "show", added.ID)
	if shown.ID != added.ID || shown.Secret != "" || shown.Name != "CLI App" {
		t.Errorf("client show = %+v (and must never print a secret)", shown)
	}
	if out := e.cli(t, "show", added.ID); !strings.Contains(out, "client_id") || !strings.Contains(out, redirect) {
		t.Errorf("client show (table):\n%s", out)
	}

	// update: the removed redirect URI is refused at once.
	var updated cliClient
	e.cliJSON(t, &updated, "update", added.ID, "--name", "CLI App 2", "--redirect-uri", "https://cli-app.example/new")
	if updated.Name != "CLI App 2" || len(updated.RedirectURIs) != 1 {
		t.Errorf("client update = %+v", updated)
	}
	expectOAuthError(t, e.do(t, "GET", rp.conf.AuthCodeURL("st"), nil), http.StatusBadRequest, "invalid_request")

	// rotate-secret: the old secret works within its grace period, not after.
	// The grace is long enough for the command to exit and two token requests
	// to be answered on a loaded machine.
	var rotated cliClient
	e.cliJSON(t, &rotated, "rotate-secret", added.ID, "--grace", "10s")
	if len(rotated.Secret) != 43 || rotated.Secret == added.Secret || rotated.PreviousExpiry == "" {
		t.Fatalf("client rotate-secret = %+v", rotated)
	}
	if !e.authenticates(t, added.ID, added.Secret) || !e.authenticates(t, added.ID, rotated.Secret) {
		t.Fatal("within the grace period both secrets must work")
	}
	waitUntil(t, 20*time.Second, "the old secret stops working after its 10s grace", func() bool {
		return !e.authenticates(t, added.ID, added.Secret)
	})
	if !e.authenticates(t, added.ID, rotated.Secret) {
		t.Error("the new secret stopped working")
	}

	// remove: the client and its grants are gone.
	if out := e.cli(t, "remove", added.ID); !strings.Contains(out, "removed "+added.ID) {
		t.Errorf("client remove: %s", out)
	}
	e.expectRevoked(t, tok.AccessToken)
	rp.conf.ClientSecret = rotated.Secret
	_, err = rp.forceRefresh(tok.RefreshToken)
	expectRetrieveError(t, err, http.StatusUnauthorized, "invalid_client")
	if e.authenticates(t, added.ID, rotated.Secret) {
		t.Error("a removed client still authenticates")
	}

	// Errors: each a clear non-zero exit.
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"show unknown", []string{"show", "pg_AAAAAAAAAAAAAAAAAAAAAA"}, `caddy palmgate client show: no client "pg_AAAAAAAAAAAAAAAAAAAAAA"`},
		{"remove static", []string{"remove", "static-app"}, "statically"},
		{"update static", []string{"update", "static-app", "--name", "x"}, "statically"},
		{"add with another scheme", []string{"add", "--name", "x", "--redirect-uri", "ftp://example.com/cb"}, `caddy palmgate client add: --redirect-uri "ftp://example.com/cb": the scheme ftp is not an app's own: use https`},
		{"add an app scheme with a secret", []string{"add", "--name", "x", "--redirect-uri", "com.example.app:/cb"}, `caddy palmgate client add: --redirect-uri "com.example.app:/cb": a private-use scheme (RFC 8252 7.1) is for a public client`},
		{"add without redirect", []string{"add", "--name", "x"}, "caddy palmgate client add: --redirect-uri is required"},
		{"rotate bad grace", []string{"rotate-secret", "static-app", "--grace", "soon"}, `caddy palmgate client rotate-secret: --grace "soon": not a duration`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := e.cliErr(t, tc.args...)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Errorf("caddy palmgate client %v: %v, output lacks %q:\n%s", tc.args, err, tc.want, out)
			}
		})
	}
}

// TestClientAdminAPIErrors: the admin API's refusals are 4xx JSON errors.
func TestClientAdminAPIErrors(t *testing.T) {
	t.Parallel()
	e := startOIDC(t, []oidcClient{newOIDCClient("static-app", "")})
	admin := "http://" + e.AdminAddr + "/palmgate/clients"
	long := strings.Repeat("n", 101)
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		want               string
	}{
		{"unknown client", "GET", "/pg_AAAAAAAAAAAAAAAAAAAAAA", nil, 404, "no client"},
		{"malformed id", "GET", "/not-a-client", nil, 404, "no client"},
		{"static update", "PATCH", "/static-app", map[string]any{"name": "x"}, 409, "statically"},
		{"static delete", "DELETE", "/static-app", nil, 409, "statically"},
		{"static rotate", "POST", "/static-app/rotate-secret", map[string]any{}, 409, "statically"},
		{"not JSON", "POST", "", "name=x", 400, "body"},
		{"unknown field", "POST", "", map[string]any{"name": "x", "redirect_uris": []string{"https://a.example/cb"}, "secret": "mine"}, 400, "unknown field"},
		{"no name", "POST", "", map[string]any{"redirect_uris": []string{"https://a.example/cb"}}, 400, "required"},
		{"long name", "POST", "", map[string]any{"name": long, "redirect_uris": []string{"https://a.example/cb"}}, 400, "name"},
		{"fragment", "POST", "", map[string]any{"name": "x", "redirect_uris": []string{"https://a.example/cb#f"}}, 400, "fragment"},
		{"relative", "POST", "", map[string]any{"name": "x", "redirect_uris": []string{"/cb"}}, 400, "absolute"},
		{"bad grace", "POST", "/pg_AAAAAAAAAAAAAAAAAAAAAA/rotate-secret", map[string]any{"grace": "-1s"}, 400, "grace"},
		{"method", "PUT", "", nil, 405, "not allowed"},
		{"method on a client", "POST", "/pg_AAAAAAAAAAAAAAAAAAAAAA", nil, 405, "not allowed"},
		{"method on rotate", "GET", "/pg_AAAAAAAAAAAAAAAAAAAAAA/rotate-secret", nil, 405, "not allowed"},
		{"no route", "GET", "/pg_AAAAAAAAAAAAAAAAAAAAAA/secrets", nil, 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := testserver.Do(t, tc.method, admin+tc.path, tc.body, "Origin", "http://"+e.AdminAddr)
			if resp.Status != tc.status || !strings.Contains(string(resp.Body), tc.want) {
				t.Errorf("%s %s: %d %s; want %d with %q", tc.method, tc.path, resp.Status, resp.Body, tc.status, tc.want)
			}
			if resp.Status == 405 && resp.Header.Get("Allow") == "" {
				t.Errorf("%s %s: 405 without Allow (RFC 9110 15.5.6)", tc.method, tc.path)
			}
			if resp.Status != 404 || tc.want != "" {
				if m := resp.Object(t); str(m["error"]) == "" {
					t.Errorf("error body %s has no error message", resp.Body)
				}
			}
		})
	}
}

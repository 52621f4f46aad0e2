package caddymodule

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

// adaptAll runs the real Caddyfile adapter and returns the whole config.
func adaptAll(caddyfile string) ([]byte, []caddyconfig.Warning, error) {
	return caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
}

// adapt runs the real Caddyfile adapter and returns the palmgate app's JSON.
func adapt(t *testing.T, caddyfile string) (json.RawMessage, error) {
	t.Helper()
	cfg, _, err := adaptAll(caddyfile)
	if err != nil {
		return nil, err
	}
	var parsed struct {
		Apps map[string]json.RawMessage `json:"apps"`
	}
	if err := json.Unmarshal(cfg, &parsed); err != nil {
		t.Fatal(err)
	}
	return parsed.Apps["palmgate"], nil
}

// TestCaddyfileGolden pins the global option grammar: every option, adapted to JSON
// (full: the Badger store and every other option; postgres: `storage postgres` with
// its options, and the `off` forms), and palmgate_bearer's (full.bearer.json: its
// handlers in the sites of full.caddyfile). TestGoldenCoversEveryOption checks
// that no option is left out. To regenerate a file after changing a Caddyfile,
// copy the JSON this test prints when they differ.
func TestCaddyfileGolden(t *testing.T) {
	for _, name := range []string{"full", "postgres"} {
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile("testdata/" + name + ".caddyfile")
			if err != nil {
				t.Fatal(err)
			}
			got, err := adapt(t, string(in))
			if err != nil {
				t.Fatalf("adapting: %v", err)
			}
			want, err := os.ReadFile("testdata/" + name + ".json")
			if err != nil {
				t.Fatal(err)
			}
			var gotIndented, wantCompact bytes.Buffer
			if err := json.Indent(&gotIndented, got, "", "\t"); err != nil {
				t.Fatal(err)
			}
			if err := json.Compact(&wantCompact, want); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, wantCompact.Bytes()) {
				t.Errorf("adapted palmgate app differs from testdata/%s.json:\n%s", name, gotIndented.String())
			}
			// The palmgate_bearer blocks of the sites, in testdata/<name>.bearer.json.
			wantBearers, err := os.ReadFile("testdata/" + name + ".bearer.json")
			if os.IsNotExist(err) {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gotBearers, err := json.MarshalIndent(adaptBearers(t, string(in)), "", "\t")
			if err != nil {
				t.Fatal(err)
			}
			wantCompact.Reset()
			gotCompact := new(bytes.Buffer)
			if err := json.Compact(&wantCompact, wantBearers); err != nil {
				t.Fatal(err)
			}
			if err := json.Compact(gotCompact, gotBearers); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(gotCompact.Bytes(), wantCompact.Bytes()) {
				t.Errorf("adapted palmgate_bearer handlers differ from testdata/%s.bearer.json:\n%s", name, gotBearers)
			}
		})
	}
}

func TestCaddyfileErrorsNameTheOption(t *testing.T) {
	for _, tc := range []struct {
		name, block, want string
	}{
		{"bad duration", "registration_session_ttl banana", "registration_session_ttl"},
		{"duration without value", "auth_code_ttl", "auth_code_ttl"},
		{"ttl zero", "access_token_ttl 0s", "access_token_ttl: must be at least 1s, got 0s"},
		// A Caddyfile of a release before 2026-11-27, where 0 meant the default, is
		// told the fix when the upgrade refuses it.
		{"ttl zero of an older Caddyfile", "login_ttl 0", "login_ttl: must be at least 1s, got 0s (releases before 2026-11-27 read 0 as the default: remove the line to keep it)"},
		{"ttl zero without unit", "refresh_token_ttl 0", "refresh_token_ttl: must be at least 1s, got 0s"},
		{"challenge_max_age zero", "challenge_max_age 0s", "challenge_max_age: must be at least 1s"},
		{"storage postgres statement_timeout zero", "storage postgres postgres://db/p {\n\tstatement_timeout 0s\n}", "statement_timeout: must be more than 0"},
		{"storage postgres connect_timeout zero", "storage postgres postgres://db/p {\n\tconnect_timeout 0s\n}", "connect_timeout: must be more than 0"},
		{"storage backend", "storage redis /x", "storage"},
		{"storage postgres without dsn", "storage postgres", "storage"},
		{"storage postgres unknown option", "storage postgres postgres://db/p {\n\tpool_size 4\n}", "pool_size"},
		{"storage postgres max_conns not a number", "storage postgres postgres://db/p {\n\tmax_conns many\n}", "max_conns"},
		{"storage postgres max_conns zero", "storage postgres postgres://db/p {\n\tmax_conns 0\n}", "max_conns"},
		{"storage postgres max_conns twice an argument", "storage postgres postgres://db/p {\n\tmax_conns 4 5\n}", "max_conns"},
		{"storage postgres bad statement_timeout", "storage postgres postgres://db/p {\n\tstatement_timeout soon\n}", "statement_timeout"},
		{"storage postgres bad connect_timeout", "storage postgres postgres://db/p {\n\tconnect_timeout\n}", "connect_timeout"},
		{"storage postgres bad group_commits", "storage postgres postgres://db/p {\n\tgroup_commits maybe\n}", "group_commits"},
		{"storage postgres group_commits without value", "storage postgres postgres://db/p {\n\tgroup_commits\n}", "group_commits"},
		{"storage badger with options", "storage badger /x {\n\tmax_conns 4\n}", "badger"},
		{"attestor arity", "palm_attestor onlyname", "palm_attestor"},
		{"rate limit count", "rate_limit many 1m", "rate_limit"},
		{"rate limit window", "rate_limit 10 soon", "rate_limit"},
		{"dev with argument", "dev yes", "dev"},
		{"unknown option", "colour blue", "colour"},
		{"client without id", "client {\n}", "client"},
		{"client unknown option", "client demo {\n\tcolour blue\n}", "colour"},
		{"redirect_uri without uri", "client demo {\n\tredirect_uri\n}", "redirect_uri"},
		{"post_logout_redirect_uri without uri", "client demo {\n\tpost_logout_redirect_uri\n}", "post_logout_redirect_uri"},
		{"backchannel_logout_uri without uri", "client demo {\n\tbackchannel_logout_uri\n}", "backchannel_logout_uri"},
		{"backchannel_logout_uri with a fragment", "client demo {\n\tbackchannel_logout_uri https://app.example/bcl#x\n}", "fragment"},
		{"backchannel_logout_uri relative", "client demo {\n\tbackchannel_logout_uri /bcl\n}", "absolute"},
		{"secret_hash without value", "client demo {\n\tsecret_hash\n}", "secret_hash"},
		{"scopes without scope", "client demo {\n\tscopes\n}", "scopes"},
		{"resources without uri", "client demo {\n\tresources\n}", "resources"},
		{"id_token_signed_response_alg without value", "client demo {\n\tid_token_signed_response_alg\n}", "id_token_signed_response_alg"},
		{"id_token_signed_response_alg HS256", "client demo {\n\tid_token_signed_response_alg HS256\n}", "id_token_signed_response_alg"},
		{"id_token_signed_response_alg none", "client demo {\n\tid_token_signed_response_alg none\n}", "id_token_signed_response_alg"},
		{"id_token_signed_response_alg in lower case", "client demo {\n\tid_token_signed_response_alg es256\n}", "id_token_signed_response_alg"},
		{"access_token_audience without value", "client demo {\n\taccess_token_audience\n}", "access_token_audience"},
		{"access_token_audience issuer", "client demo {\n\taccess_token_audience issuer\n}", "access_token_audience"},
		{"access_token_audience with two values", "client demo {\n\taccess_token_audience client_id base_url\n}", "access_token_audience"},
		{"public with an argument", "client demo {\n\tpublic yes\n}", "public"},
		{"allowed_origins without origin", "client demo {\n\tallowed_origins\n}", "allowed_origins"},
		{"max_pending_logins not a number", "max_pending_logins many", "max_pending_logins"},
		{"per_network not a number", "max_pending_logins 100 {\n\tper_network many\n}", "max_pending_logins: per_network"},
		{"per_network zero", "max_pending_registrations 100 {\n\tper_network 0\n}", "max_pending_registrations: per_network"},
		{"per_network without value", "max_pending_logins 100 {\n\tper_network\n}", "per_network"},
		{"per_network under a cap that is off", "max_pending_logins off {\n\tper_network 10\n}", "per_network needs the global cap"},
		{"max_pending unknown option", "max_pending_logins 100 {\n\tper_address 10\n}", "per_address"},
		{"portal with a word", "portal on", "portal"},
		{"portal unknown option", "portal {\n\tcolour blue\n}", "colour"},
		{"portal max_applications zero", "portal {\n\tmax_applications 0\n}", "max_applications"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := adapt(t, "{\n\tpalmgate {\n\t\t"+tc.block+"\n\t}\n}\n:8080 {\n\tpalmgate\n}\n")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	valid := func() *App {
		a := &App{Issuer: "https://id.example.com", PalmAttestors: []PalmAttestor{{Name: "engine", PublicKey: "k"}}}
		a.setDefaults()
		return a
	}
	if err := valid().Validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	native := valid() // fourth review: a public native app's private-use scheme (RFC 8252 7.1)
	native.Clients = []Client{{ID: "desktop", Public: true, RedirectURIs: []string{"com.example.app:/oauth2redirect"}, PostLogoutRedirectURIs: []string{"com.example.app:/out"}}}
	if err := native.Validate(); err != nil {
		t.Fatalf("a public client with a private-use scheme refused: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*App)
		want   string
	}{
		{"no issuer", func(a *App) { a.Issuer = "" }, "issuer"},
		{"group commits off on badger", func(a *App) { a.Storage.DisableGroupCommits = true }, "disable_group_commits"},
		{"issuer with path", func(a *App) { a.Issuer = "https://id.example.com/oauth2" }, "issuer"},
		{"issuer not http", func(a *App) { a.Issuer = "ftp://id.example.com" }, "issuer"},
		{"plain http outside dev", func(a *App) { a.Issuer = "http://id.example.com" }, "https"},
		{"no attestor, no dev", func(a *App) { a.PalmAttestors = nil }, "palm_attestor"},
		{"attestor twice", func(a *App) { a.PalmAttestors = append(a.PalmAttestors, a.PalmAttestors[0]) }, "palm_attestor engine"},
		{"short pairwise secret", func(a *App) { a.PairwiseSecret = "short" }, "pairwise_secret"},
		{"sub-second ttl", func(a *App) { a.AuthCodeTTL = 1 }, "auth_code_ttl"},
		{"sub-second login ttl", func(a *App) { a.LoginTTL = 1 }, "login_ttl"},
		{"client without secret", func(a *App) { a.Clients = []Client{{ID: "c", RedirectURIs: []string{"https://a/cb"}}} }, "secret"},
		{"public client with a secret", func(a *App) {
			a.Clients = []Client{{ID: "c", Public: true, Secret: "s", RedirectURIs: []string{"https://a/cb"}}}
		}, "public client has no secret"},
		{"wildcard allowed origin", func(a *App) {
			a.Clients = []Client{{ID: "c", Public: true, RedirectURIs: []string{"https://a/cb"}, AllowedOrigins: []string{"*"}}}
		}, "allowed_origins"},
		{"relative redirect", func(a *App) { a.Clients = []Client{{ID: "c", Secret: "s", RedirectURIs: []string{"/cb"}}} }, "redirect_uri"},
		{"private-use scheme of a confidential client", func(a *App) {
			a.Clients = []Client{{ID: "c", Secret: "s", RedirectURIs: []string{"com.example.app:/cb"}}}
		}, "is for a public client"},
		{"javascript redirect of a public client", func(a *App) {
			a.Clients = []Client{{ID: "c", Public: true, RedirectURIs: []string{"javascript://x/%0aalert(1)"}}}
		}, "not an app's own"},
		{"wildcard redirect (issue 18, finding 6)", func(a *App) {
			a.Clients = []Client{{ID: "c", Secret: "s", RedirectURIs: []string{"https://*.evil.example/cb"}}}
		}, "client c: redirect_uri"},
		{"redirect with a space", func(a *App) {
			a.Clients = []Client{{ID: "c", Secret: "s", RedirectURIs: []string{"https://evil.example/a b"}}}
		}, "client c: redirect_uri"},
		{"plain http redirect to a public host outside dev mode", func(a *App) {
			a.Clients = []Client{{ID: "c", Secret: "s", RedirectURIs: []string{"http://app.example/cb"}}}
		}, "client c: redirect_uri \"http://app.example/cb\": must use https"},
		{"post-logout redirect with port 99999", func(a *App) {
			a.Clients = []Client{{ID: "c", Secret: "s", PostLogoutRedirectURIs: []string{"https://evil.example:99999/out"}}}
		}, "client c: post_logout_redirect_uri"},
		{"post-logout redirect with fragment", func(a *App) {
			a.Clients = []Client{{ID: "c", Secret: "s", PostLogoutRedirectURIs: []string{"https://a/out#x"}}}
		}, "post_logout_redirect_uri"},
		{"scopes without openid", func(a *App) {
			a.Clients = []Client{{ID: "c", Secret: "s", Scopes: []string{"orders:read"}}}
		}, "scopes must include openid"},
		{"scope with a quote", func(a *App) {
			a.Clients = []Client{{ID: "c", Secret: "s", Scopes: []string{"openid", `a"b`}}}
		}, "scopes"},
		{"ID token algorithm HS256 (JSON config)", func(a *App) {
			a.Clients = []Client{{ID: "c", Secret: "s", IDTokenSignedResponseAlg: "HS256"}}
		}, "id_token_signed_response_alg"},
		{"access token audience unknown (JSON config)", func(a *App) {
			a.Clients = []Client{{ID: "c", Secret: "s", AccessTokenAudience: "issuer"}}
		}, "client c: access_token_audience"},
		{"relative resource", func(a *App) {
			a.Clients = []Client{{ID: "c", Secret: "s", Resources: []string{"/api"}}}
		}, "resources"},
		{"resource with a fragment", func(a *App) {
			a.Clients = []Client{{ID: "c", Secret: "s", Resources: []string{"https://api.example.com/#x"}}}
		}, "resources"},
		{"secret and secret_hash", func(a *App) {
			a.Clients = []Client{{ID: "c", Secret: "s", SecretHash: "sha256:" + strings.Repeat("0", 64)}}
		}, "exclusive"},
		{"secret_hash in clear", func(a *App) {
			a.Clients = []Client{{ID: "c", SecretHash: "s3cret"}}
		}, "secret_hash"},
		{"secret_hash of bcrypt", func(a *App) {
			a.Clients = []Client{{ID: "c", SecretHash: "$2a$14$ajq8Q7fbtFRQvXpdCq7Jcuy.Rx1h/L4J60Otx.gyNLbAYctGMJ9tK"}}
		}, "secret_hash"},
		{"portal's client id", func(a *App) {
			a.Clients = []Client{{ID: "palmgate-portal", Secret: "s"}}
		}, "reserved"},
		{"per_network below -1 (JSON config)", func(a *App) { a.MaxPendingLoginsPerNetwork = -2 }, "max_pending_logins per_network"},
		{"per_network above the global cap", func(a *App) {
			a.MaxPendingRegistrations, a.MaxPendingRegistrationsPerNetwork = 100, 101
		}, "max_pending_registrations per_network"},
		{"per_network without the global cap (JSON config)", func(a *App) { a.MaxPendingLogins = -1 }, "needs the global cap"},
		{"client twice", func(a *App) {
			c := Client{ID: "c", Secret: "s", RedirectURIs: []string{"https://a/cb"}}
			a.Clients = []Client{c, c}
		}, "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := valid()
			tc.change(a)
			err := a.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error naming %q", err, tc.want)
			}
		})
	}
	// `max_pending_logins off` leaves per_network unset (0): a cap that is off
	// has no network share to exceed.
	t.Run("global caps off, per_network unset", func(t *testing.T) {
		a := &App{Issuer: "https://id.example.com", PalmAttestors: []PalmAttestor{{Name: "engine", PublicKey: "k"}},
			MaxPendingLogins: -1, MaxPendingRegistrations: -1}
		a.setDefaults()
		if err := a.Validate(); err != nil {
			t.Fatalf("caps off refused: %v", err)
		}
	})
	t.Run("http on loopback and in dev", func(t *testing.T) {
		for _, issuer := range []string{"http://127.0.0.1:8080", "http://localhost:8080"} {
			a := valid()
			a.Issuer = issuer
			if err := a.Validate(); err != nil {
				t.Errorf("%s refused: %v", issuer, err)
			}
		}
		a := valid()
		a.Issuer, a.Dev = "http://dev.internal", true
		if err := a.Validate(); err != nil {
			t.Errorf("http issuer in dev refused: %v", err)
		}
	})
}

func TestCaddyfilePortalOff(t *testing.T) {
	got, err := adapt(t, "{\n\tpalmgate {\n\t\tissuer https://id.example.com\n\t\tportal off\n\t}\n}\n:8080 {\n\tpalmgate\n}\n")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), `"portal":{"off":true}`) {
		t.Errorf("portal off adapted to %s", got)
	}
}

// TestPendingCapDefaults: a network's cap defaults to a 64th of its global cap
// (781 of the default 50000, so filling the global cap takes 65 networks), at
// least 100 or the whole cap if lower; with the global cap off it is off too,
// and an explicit value stays.
func TestPendingCapDefaults(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		total, perNetwork    int
		wantTotal, wantPerNw int
	}{
		{"defaults", 0, 0, 50000, 781},
		{"global set", 12800, 0, 12800, 200},
		{"small global: the floor", 1000, 0, 1000, 100},
		{"tiny global: the whole cap", 10, 0, 10, 10},
		{"global off", -1, 0, -1, 0},
		{"explicit", 1000, 200, 1000, 200},
		{"explicit off", 1000, -1, 1000, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &App{MaxPendingLogins: tc.total, MaxPendingLoginsPerNetwork: tc.perNetwork,
				MaxPendingRegistrations: tc.total, MaxPendingRegistrationsPerNetwork: tc.perNetwork}
			a.setDefaults()
			if a.MaxPendingLogins != tc.wantTotal || a.MaxPendingLoginsPerNetwork != tc.wantPerNw ||
				a.MaxPendingRegistrations != tc.wantTotal || a.MaxPendingRegistrationsPerNetwork != tc.wantPerNw {
				t.Errorf("caps %d/%d (logins), %d/%d (registrations); want %d/%d", a.MaxPendingLogins, a.MaxPendingLoginsPerNetwork,
					a.MaxPendingRegistrations, a.MaxPendingRegistrationsPerNetwork, tc.wantTotal, tc.wantPerNw)
			}
		})
	}
}

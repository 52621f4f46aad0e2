package bench

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/palmgate/palmgate/internal/loadgen"
	"github.com/palmgate/palmgate/internal/testserver"
)

func TestMain(m *testing.M) { testserver.Main(m) }

// The OAuth client the benchmarks log in with.
const (
	clientID    = "bench"
	redirectURI = "https://bench.example/callback"
)

// caddyfile is the server under measurement: one Caddy, one site with palmgate
// and the measured routes, and a second site on another port that is the
// upstream of every reverse_proxy. The upstream is Caddy's static `respond`:
// the cheapest HTTP server at hand, in the same process (so it does not compete
// with the load generator for CPU more in one scenario than in another), and the
// same for the bare baseline and the bearer routes. {upport} and {secret} are
// filled in by startSite; testserver fills in the others.
const caddyfile = `{
	admin 127.0.0.1:{adminport}
	persist_config off
	palmgate {
		issuer http://127.0.0.1:{port}
		storage badger {datadir}/palmgate
		dev
		rate_limit off
		max_pending_logins off
		max_pending_registrations off
		client ` + clientID + ` {
			secret {secret}
			redirect_uri ` + redirectURI + `
		}
	}
}

http://127.0.0.1:{port} {
	palmgate
	handle /bare/* {
		reverse_proxy 127.0.0.1:{upport}
	}
	handle /headers/* {
		request_header X-Palmgate-Sub {identitysub}
		request_header X-Palmgate-Scope "openid offline_access"
		request_header X-Palmgate-Client-Id ` + clientID + `
		reverse_proxy 127.0.0.1:{upport}
	}
	handle /cached/* {
		palmgate_bearer {
			scope openid
		}
		reverse_proxy 127.0.0.1:{upport}
	}
	handle /stripped/* {
		palmgate_bearer {
			scope openid
			strip_token
		}
		reverse_proxy 127.0.0.1:{upport}
	}
	handle /uncached/* {
		palmgate_bearer {
			scope openid
			cache_size -1
		}
		reverse_proxy 127.0.0.1:{upport}
	}
}

http://127.0.0.1:{upport} {
	respond "ok" 200
}
`

// pairwiseSubLen is the length of a pairwise sub (base64url of an HMAC-SHA256),
// the value of X-Palmgate-Sub: the headers scenario sets one as long.
const pairwiseSubLen = 43

// site is the running server, with one access token to reuse.
type site struct {
	*testserver.Server
	secret string
	// token is an access token of scope "openid offline_access".
	token string
	// chains are refresh tokens, one per login; refreshing one gives a new access
	// token and replaces it (rotation), so each chain is used by one goroutine.
	chains []string
	// pid is the caddy process, for its CPU time.
	pid int
}

// startSite starts the server and logs in once per chain.
func startSite(t testing.TB, chains int) *site {
	t.Helper()
	secret := randHex(16)
	upport := testserver.FreePort(t)
	cf := strings.NewReplacer("{upport}", strconv.Itoa(upport), "{secret}", secret,
		"{identitysub}", strings.Repeat("s", pairwiseSubLen)).Replace(caddyfile)
	s := &site{Server: testserver.Start(t, testserver.Options{Caddyfile: cf}), secret: secret}
	s.pid = loadgen.FindPID(s.ConfigPath)
	for i := range chains {
		access, refresh, err := s.login(fmt.Sprintf("palm-subject-bench-%d-%s", i, randHex(6)))
		if err != nil {
			t.Fatalf("login: %v", err)
		}
		if i == 0 {
			s.token = access
		}
		s.chains = append(s.chains, refresh)
	}
	// The routes answer as expected before anything is measured.
	for _, c := range []struct {
		path, token string
		want        int
	}{
		{"/bare/x", s.token, 200}, {"/cached/x", s.token, 200}, {"/uncached/x", s.token, 200},
		{"/oauth2/check?scope=openid", s.token, 200},
		{"/cached/x", "", 401}, {"/uncached/x", s.token + "x", 401},
	} {
		req, _ := http.NewRequest("GET", s.URL+c.path, nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, body, err := do(req)
		if err != nil || resp.StatusCode != c.want {
			t.Fatalf("GET %s: %v %v, want %d\n%s", c.path, status(resp), err, c.want, body)
		}
	}
	return s
}

func status(r *http.Response) any {
	if r == nil {
		return "no response"
	}
	return r.StatusCode
}

// login runs a dev-mode login of subject at the bench client: authorize, the
// login page (JSON), a dev-scan of its palm challenge, the redirect back with a
// code, the code exchange. It returns the access and refresh tokens.
func (s *site) login(subject string) (access, refresh string, err error) {
	q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirectURI},
		"scope": {"openid offline_access"}, "state": {"st"}, "nonce": {"n-" + randHex(8)}}
	loc, err := s.redirect(s.URL + "/oauth2/authorize?" + q.Encode())
	if err != nil {
		return "", "", fmt.Errorf("authorize: %w", err)
	}
	verify := s.URL + "/oauth2/verify?auth_request_id=" + url.QueryEscape(loc.Query().Get("auth_request_id"))
	req, _ := http.NewRequest("GET", verify, nil)
	req.Header.Set("Accept", "application/json")
	var page struct{ ChallengeID, Nonce string }
	if err := doJSON(req, &page); err != nil {
		return "", "", fmt.Errorf("login page: %w", err)
	}
	scan, _ := json.Marshal(map[string]string{"nonce": page.Nonce, "palmSubject": subject})
	req, _ = http.NewRequest("POST", s.URL+"/v1/palm/challenges/"+page.ChallengeID+"/dev-scan", bytes.NewReader(scan))
	req.Header.Set("Content-Type", "application/json")
	if err := doJSON(req, &struct{}{}); err != nil {
		return "", "", fmt.Errorf("dev-scan: %w", err)
	}
	if loc, err = s.redirect(verify); err != nil {
		return "", "", fmt.Errorf("back to the client: %w", err)
	}
	return s.token2(url.Values{"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")}, "redirect_uri": {redirectURI}})
}

// refresh redeems a refresh token for a new access token and refresh token.
func (s *site) refresh(refreshToken string) (access, refresh string, err error) {
	return s.token2(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refreshToken}})
}

func (s *site) token2(form url.Values) (access, refresh string, err error) {
	form.Set("client_id", clientID)
	form.Set("client_secret", s.secret)
	req, _ := http.NewRequest("POST", s.URL+"/oauth2/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	var tok struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
	}
	if err := doJSON(req, &tok); err != nil {
		return "", "", fmt.Errorf("token (%s): %w", form.Get("grant_type"), err)
	}
	if tok.AccessToken == "" || tok.RefreshToken == "" {
		return "", "", fmt.Errorf("token (%s): no access or refresh token", form.Get("grant_type"))
	}
	return tok.AccessToken, tok.RefreshToken, nil
}

// mint returns n new, distinct access tokens, by refresh grants on every chain in
// parallel.
func (s *site) mint(t testing.TB, n int) []string {
	t.Helper()
	tokens := make([]string, n)
	var wg sync.WaitGroup
	errs := make([]error, len(s.chains))
	for c := range s.chains {
		wg.Go(func() {
			for i := c; i < n; i += len(s.chains) {
				var err error
				if tokens[i], s.chains[c], err = s.refresh(s.chains[c]); err != nil {
					errs[c] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("minting tokens: %v", err)
		}
	}
	return tokens
}

// redirect GETs u and returns the Location of its 302.
func (s *site) redirect(u string) (*url.URL, error) {
	req, _ := http.NewRequest("GET", u, nil)
	resp, body, err := do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusFound {
		return nil, fmt.Errorf("status %d, want 302: %.300s", resp.StatusCode, body)
	}
	return url.Parse(resp.Header.Get("Location"))
}

// do sends req with testserver's client (no redirects followed) and reads the body.
func do(req *http.Request) (*http.Response, []byte, error) {
	resp, err := testserver.Client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// doJSON sends req, expects 200 and decodes the JSON body into v.
func doJSON(req *http.Request, v any) error {
	resp, body, err := do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: status %d: %.300s", req.Method, req.URL.Path, resp.StatusCode, body)
	}
	return json.Unmarshal(body, v)
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// getRequest is a GET of path with a bearer token ("" for none), as the load
// generator sends it.
func getRequest(host, path, token string) []byte {
	if token == "" {
		return loadgen.GetRequest(host, path)
	}
	return loadgen.GetRequest(host, path, "Authorization: Bearer "+token)
}

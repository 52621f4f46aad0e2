package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
)

type load struct {
	base     string
	http     *http.Client
	requests atomic.Int64
	errors   atomic.Int64

	mu       sync.Mutex
	errTexts map[string]int
	ops      map[string]int
	agents   []registeredAgent // a ring of registered agents, for lookups
	next     atomic.Int64
}

type registeredAgent struct{ deviceID, urlKey string }

func newLoad(base string) *load {
	// The workers are one browser: it keeps each login's cookie.
	jar, _ := cookiejar.New(nil)
	return &load{
		base: base,
		http: &http.Client{
			Jar:           jar,
			Timeout:       30 * time.Second,
			Transport:     &http.Transport{MaxIdleConnsPerHost: 64},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		errTexts: map[string]int{},
		ops:      map[string]int{},
	}
}

func (l *load) worker(ctx context.Context, id int) {
	rng := mrand.New(mrand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
	for ctx.Err() == nil {
		var op string
		switch p := rng.Float64(); {
		case p < 0.35:
			op = l.register(ctx, rng)
		case p < 0.60:
			op = l.login(ctx, rng)
		case p < 0.85:
			op = l.lookup(ctx, rng)
		default:
			op = "leaderboard"
			l.call(ctx, "GET", "/v1/human/leaderboard?limit=100", nil, "", http.StatusOK)
		}
		l.mu.Lock()
		l.ops[op]++
		l.mu.Unlock()
	}
}

// call sends a request and expects status want; it returns the body, or nil
// after counting a failure. A request cut short by the end of the run is not one.
func (l *load) call(ctx context.Context, method, path string, body []byte, contentType string, want int, headers ...string) (*http.Response, []byte) {
	u := path
	if strings.HasPrefix(path, "/") {
		u = l.base + path
	}
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		l.fail("building request: " + err.Error())
		return nil, nil
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	l.requests.Add(1)
	resp, err := l.http.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			l.fail(fmt.Sprintf("%s %s: %v", method, route(path), err))
		}
		return nil, nil
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		if ctx.Err() == nil {
			l.fail(fmt.Sprintf("%s %s: reading the body: %v", method, route(path), err))
		}
		return nil, nil
	}
	if resp.StatusCode != want {
		l.fail(fmt.Sprintf("%s %s: status %d, want %d: %.200s", method, route(path), resp.StatusCode, want, data))
		return nil, nil
	}
	return resp, data
}

// route strips ids from a path, to group errors.
func route(p string) string {
	p, _, _ = strings.Cut(p, "?")
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if len(s) > 20 {
			parts[i] = "{id}"
		}
	}
	return strings.Join(parts, "/")
}

func (l *load) fail(text string) {
	l.errors.Add(1)
	l.mu.Lock()
	l.errTexts[text]++
	l.mu.Unlock()
}

func (l *load) postJSON(ctx context.Context, path string, v any, want int) []byte {
	b, _ := json.Marshal(v)
	_, data := l.call(ctx, "POST", path, b, "application/json", want)
	return data
}

// register opens a registration session; 15% are completed with a simulated
// palm scan by one of 50 people, the rest are left to expire (a third polled once).
func (l *load) register(ctx context.Context, rng *mrand.Rand) string {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(pub)
	n := l.next.Add(1)
	deviceID := fmt.Sprintf("soak-%d-%d", time.Now().UnixNano(), n)
	ms := time.Now().UnixMilli()
	msg := fmt.Sprintf("soak%d-register-%d", n, ms)
	data := l.postJSON(ctx, "/v1/agent/register/init", map[string]any{
		"deviceId": deviceID, "publicKey": base64.StdEncoding.EncodeToString(der), "message": msg,
		"signature": base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte(msg))), "timestamp": ms,
	}, http.StatusCreated)
	var session struct {
		SessionID string `json:"sessionId"`
	}
	if data == nil || json.Unmarshal(data, &session) != nil {
		return "init"
	}
	switch p := rng.Float64(); {
	case p < 0.15:
		// The owner's page as a phone gets it: the app link is the scan URL.
		_, data := l.call(ctx, "GET", "/v1/agent/register/"+session.SessionID+"/verify", nil, "", http.StatusOK, "User-Agent", testserver.PhoneUserAgent)
		scan, err := url.Parse(testserver.AppLink(data))
		if data == nil || err != nil || scan.Query().Get("nonce") == "" {
			return "init+scan"
		}
		if l.postJSON(ctx, scan.Path+"/dev-scan",
			map[string]string{"nonce": scan.Query().Get("nonce"), "palmSubject": fmt.Sprintf("soak-person-%d", rng.IntN(50))}, http.StatusOK) != nil {
			l.mu.Lock()
			if len(l.agents) < 10000 {
				l.agents = append(l.agents, registeredAgent{deviceID, base64.URLEncoding.EncodeToString(der)})
			} else {
				l.agents[rng.IntN(len(l.agents))] = registeredAgent{deviceID, base64.URLEncoding.EncodeToString(der)}
			}
			l.mu.Unlock()
		}
		return "init+scan"
	case p < 0.40:
		l.call(ctx, "GET", "/v1/agent/register/"+session.SessionID+"/status", nil, "", http.StatusOK)
		return "init+poll"
	default:
		return "init"
	}
}

// login runs a login: 25% are abandoned before the scan, 10% of the codes are
// never redeemed, the rest are exchanged, refreshed 1 to 3 times and used once;
// 5% of those then reuse their first refresh token, revoking the family.
func (l *load) login(ctx context.Context, rng *mrand.Rand) string {
	verifier := randToken(32)
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{
		"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirectURI},
		"scope": {"openid offline_access"}, "state": {randToken(8)}, "nonce": {randToken(8)},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
	}
	resp, _ := l.call(ctx, "GET", "/oauth2/authorize?"+q.Encode(), nil, "", http.StatusFound)
	if resp == nil {
		return "login"
	}
	verify := resp.Header.Get("Location")
	if rng.Float64() < 0.25 {
		return "login-abandoned"
	}
	_, data := l.call(ctx, "GET", verify, nil, "", http.StatusOK, "Accept", "application/json")
	var ch struct{ ChallengeID, Nonce string }
	if data == nil || json.Unmarshal(data, &ch) != nil {
		return "login"
	}
	if l.postJSON(ctx, "/v1/palm/challenges/"+ch.ChallengeID+"/dev-scan",
		map[string]string{"nonce": ch.Nonce, "palmSubject": fmt.Sprintf("soak-person-%d", rng.IntN(50))}, http.StatusOK) == nil {
		return "login"
	}
	resp, _ = l.call(ctx, "GET", verify, nil, "", http.StatusFound)
	if resp == nil {
		return "login"
	}
	cb, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || cb.Query().Get("code") == "" {
		l.fail("login: no code in " + resp.Header.Get("Location"))
		return "login"
	}
	if rng.Float64() < 0.10 {
		return "login-code-unused"
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {cb.Query().Get("code")}, "redirect_uri": {redirectURI},
		"client_id": {clientID}, "client_secret": {clientSecret}, "code_verifier": {verifier}}
	var tok struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
	}
	_, data = l.call(ctx, "POST", "/oauth2/token", []byte(form.Encode()), "application/x-www-form-urlencoded", http.StatusOK)
	if data == nil || json.Unmarshal(data, &tok) != nil {
		return "login"
	}
	first := tok.RefreshToken
	for range 1 + rng.IntN(3) {
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}, "client_id": {clientID}, "client_secret": {clientSecret}}
		_, data = l.call(ctx, "POST", "/oauth2/token", []byte(form.Encode()), "application/x-www-form-urlencoded", http.StatusOK)
		if data == nil || json.Unmarshal(data, &tok) != nil {
			return "login"
		}
	}
	if rng.Float64() < 0.05 {
		// Reuse of a rotated refresh token revokes the family (a revocation
		// record lives as long as the family's last access token).
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {first}, "client_id": {clientID}, "client_secret": {clientSecret}}
		l.call(ctx, "POST", "/oauth2/token", []byte(form.Encode()), "application/x-www-form-urlencoded", http.StatusBadRequest)
		l.call(ctx, "GET", "/oauth2/userinfo", nil, "", http.StatusUnauthorized, "Authorization", "Bearer "+tok.AccessToken)
		return "login+reuse"
	}
	l.call(ctx, "GET", "/oauth2/userinfo", nil, "", http.StatusOK, "Authorization", "Bearer "+tok.AccessToken)
	return "login+refresh"
}

// lookup looks a registered agent up by device and by key (or an unknown one).
func (l *load) lookup(ctx context.Context, rng *mrand.Rand) string {
	l.mu.Lock()
	var a registeredAgent
	if len(l.agents) > 0 && rng.Float64() < 0.8 {
		a = l.agents[rng.IntN(len(l.agents))]
	}
	l.mu.Unlock()
	if a.deviceID == "" {
		l.call(ctx, "GET", "/v1/agent/verify/device/unknown-"+randToken(6), nil, "", http.StatusOK)
		return "lookup-unknown"
	}
	l.call(ctx, "GET", "/v1/agent/verify/device/"+url.PathEscape(a.deviceID), nil, "", http.StatusOK)
	l.call(ctx, "GET", "/v1/agent/verify/public-key/"+a.urlKey, nil, "", http.StatusOK)
	return "lookup"
}

func randToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (l *load) printOps() {
	l.mu.Lock()
	defer l.mu.Unlock()
	names := make([]string, 0, len(l.ops))
	for k := range l.ops {
		names = append(names, k)
	}
	sort.Strings(names)
	var parts []string
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s %d", k, l.ops[k]))
	}
	fmt.Println("operations: " + strings.Join(parts, ", "))
}

func (l *load) printErrors() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for text, n := range l.errTexts {
		fmt.Printf("  %d x %s\n", n, text)
	}
}

package oidc

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/palmgate/palmgate/core/bearer"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/memstore"
)

// fakeAgents is an agent registry: deviceId -> key and human.
type fakeAgents struct {
	mu      sync.Mutex
	agents  map[string]fakeAgent
	lookups int // calls of AgentKey
}

type fakeAgent struct {
	key     ed25519.PrivateKey
	humanID string
}

func (f *fakeAgents) AgentKey(_ context.Context, deviceID string) (ed25519.PublicKey, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookups++
	a, ok := f.agents[deviceID]
	if !ok {
		return nil, "", nil
	}
	return a.key.Public().(ed25519.PublicKey), a.humanID, nil
}

// register registers a new agent deviceID under humanID and returns its key.
func (f *fakeAgents) register(t *testing.T, deviceID, humanID string) ed25519.PrivateKey {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.agents[deviceID] = fakeAgent{key: key, humanID: humanID}
	return key
}

func (f *fakeAgents) remove(deviceID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.agents, deviceID)
}

// actorHarness is a harness whose service knows agents, with alice's agent
// "alice-bot" and bob's agent "bob-bot" registered.
type actorHarness struct {
	*harness
	agents         *fakeAgents
	alice, bob     string // humanIds
	aliceBotKey    ed25519.PrivateKey
	bobBotKey      ed25519.PrivateKey
	strangerBotKey ed25519.PrivateKey // registered to no one
}

func newActorHarness(t *testing.T) *actorHarness {
	t.Helper()
	return newActorHarnessOn(t, memstore.New())
}

func newActorHarnessOn(t *testing.T, store storage.Store) *actorHarness {
	t.Helper()
	h := &actorHarness{harness: newHarnessOn(t, store, testSecret), agents: &fakeAgents{agents: map[string]fakeAgent{}}}
	h.svc.agents = h.agents
	h.alice = h.login(t, params(), "alice").humanID
	h.bob = h.login(t, params(), "bob").humanID
	h.aliceBotKey = h.agents.register(t, "alice-bot", h.alice)
	h.bobBotKey = h.agents.register(t, "bob-bot", h.bob)
	_, h.strangerBotKey, _ = ed25519.GenerateKey(rand.Reader)
	return h
}

// consent runs a login of who through the authorization endpoint with
// requested_actor=deviceID and returns its answer.
func (h *actorHarness) consent(t *testing.T, who, deviceID string, kv ...string) *Redirect {
	t.Helper()
	ar := h.authorize(t, params(append([]string{RequestedActorParam, deviceID}, kv...)...))
	if ar.RequestedActor != deviceID || ar.ChallengeID == "" {
		t.Fatalf("authorization request = %+v; want a palm scan for agent %s", ar, deviceID)
	}
	h.scan(t, ar, who)
	r, err := h.svc.Finish(context.Background(), ar.ID, testBinding)
	if err != nil || r == nil {
		t.Fatalf("Finish = %+v, %v", r, err)
	}
	return r
}

// assertion is an agent's signed assertion: iss = sub = deviceID, aud the token
// endpoint, exp a minute ahead, a fresh jti; change edits the claims first.
func (h *actorHarness) assertion(t *testing.T, deviceID string, key ed25519.PrivateKey, change func(jwt.MapClaims)) string {
	t.Helper()
	now := h.clock.Now()
	claims := jwt.MapClaims{
		"iss": deviceID, "sub": deviceID, "aud": oauthIssuer + "/token",
		"iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "jti": uuid.NewString(),
	}
	if change != nil {
		change(claims)
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// agentToken asks the token endpoint for an agent token as client app.
func (h *actorHarness) agentToken(assertion string, kv ...string) (*TokenResponse, error) {
	p := url.Values{"grant_type": {GrantTypeJWTBearer}, "assertion": {assertion}, "client_id": {"app"}, "client_secret": {"app-secret"}}
	for i := 0; i+1 < len(kv); i += 2 {
		p.Set(kv[i], kv[i+1])
	}
	return h.svc.Token(context.Background(), ClientRequest{Params: p})
}

func TestActorConsentRecordsAGrantAndAnswersWithACode(t *testing.T) {
	h := newActorHarness(t)
	r := h.consent(t, "alice", "alice-bot", "scope", "openid orders:read", "resource", apiResource)
	if r.Code == "" || r.Error != "" {
		t.Fatalf("consent answer = %+v; want a code", r)
	}
	g, err := readActorGrant(context.Background(), h.store, "alice-bot", "app")
	if err != nil {
		t.Fatalf("the grant was not recorded: %v", err)
	}
	if g.HumanID != h.alice || strings.Join(g.Scopes, " ") != "openid orders:read" || g.Resource != apiResource || g.ID == "" {
		t.Fatalf("grant = %+v", g)
	}
	if !g.ExpiresAt.Equal(g.CreatedAt.Add(refreshTTL)) {
		t.Fatalf("grant expires at %v; want created + %v", g.ExpiresAt, refreshTTL)
	}
}

func TestActorConsentRefusedForAnotherPersonsAgent(t *testing.T) {
	h := newActorHarness(t)
	for _, tc := range []struct{ name, who, agent string }{
		{"another person's agent", "alice", "bob-bot"},
		{"an unregistered agent", "alice", "nobody-bot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.consent(t, tc.who, tc.agent)
			if r.Code != "" || r.Error != ErrInvalidRequest || r.Description != errActorNotOwned || r.State != "st-123" {
				t.Fatalf("answer = %+v; want invalid_request %q back to the client", r, errActorNotOwned)
			}
			if _, err := readActorGrant(context.Background(), h.store, tc.agent, "app"); err == nil {
				t.Fatal("a grant was recorded")
			}
		})
	}
}

func TestActorConsentParameterChecks(t *testing.T) {
	h := newActorHarness(t)
	for name, kv := range map[string][]string{
		"control character": {RequestedActorParam, "bot\n"},
		"too long":          {RequestedActorParam, strings.Repeat("a", maxActorIDLen+1)},
		"with prompt=none":  {RequestedActorParam, "alice-bot", "prompt", "none"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := h.svc.Authorize(context.Background(), params(kv...), testBrowser)
			oe, ok := asOAuthErr(err)
			if !ok || oe.RedirectURI != appRedirect {
				t.Fatalf("Authorize = %v; want a refusal back to the client", err)
			}
		})
	}
}

func TestActorTokenActsForTheHuman(t *testing.T) {
	h := newActorHarness(t)
	h.consent(t, "alice", "alice-bot", "scope", "openid orders:read", "resource", apiResource)
	resp, err := h.agentToken(h.assertion(t, "alice-bot", h.aliceBotKey, nil), "scope", "orders:read")
	if err != nil {
		t.Fatalf("agent token: %v", err)
	}
	if resp.RefreshToken != "" || resp.IDToken != "" || resp.Scope != "orders:read" || resp.TokenType != "Bearer" {
		t.Fatalf("response = %+v; want an access token alone, scope orders:read", resp)
	}
	var claims AccessClaims
	h.parseToken(t, resp.AccessToken, "ES256", &claims)
	wantSub := PairwiseSubject([]byte(testSecret), "app", h.alice)
	if claims.Subject != wantSub || claims.Act == nil || claims.Act.Subject != "alice-bot" || claims.Act.Profile != "ai_agent" ||
		len(claims.Audience) != 1 || claims.Audience[0] != apiResource || claims.ClientID != "app" {
		t.Fatalf("claims = %+v act %+v; want sub %s, act alice-bot, aud %s", claims, claims.Act, wantSub, apiResource)
	}
	// The issuer's own verifier (userinfo, /oauth2/check, palmgate_bearer) admits it
	// and reports the agent.
	v, err := h.svc.VerifyAccessToken(context.Background(), resp.AccessToken)
	if err != nil || v.AgentID() != "alice-bot" {
		t.Fatalf("VerifyAccessToken = %+v, %v", v, err)
	}
	in, err := h.svc.Introspect(context.Background(), "other", resp.AccessToken)
	if err != nil || !in.Active || in.Act == nil || in.Act.Subject != "alice-bot" {
		t.Fatalf("Introspect = %+v, %v; want act alice-bot", in, err)
	}
	// Without scope: the grant's scopes.
	resp, err = h.agentToken(h.assertion(t, "alice-bot", h.aliceBotKey, nil))
	if err != nil || resp.Scope != "openid orders:read" {
		t.Fatalf("agent token without scope = %+v, %v", resp, err)
	}
	g, _ := readActorGrant(context.Background(), h.store, "alice-bot", "app")
	if !g.LastUsedAt.Equal(h.clock.Now().UTC()) {
		t.Fatalf("lastUsedAt = %v; want %v", g.LastUsedAt, h.clock.Now())
	}
}

func TestActorTokenRefusals(t *testing.T) {
	h := newActorHarness(t)
	h.consent(t, "alice", "alice-bot", "scope", "openid orders:read")
	h.consent(t, "bob", "bob-bot", "scope", "openid")
	replayed := h.assertion(t, "alice-bot", h.aliceBotKey, nil)
	if _, err := h.agentToken(replayed); err != nil {
		t.Fatalf("first use: %v", err)
	}
	cases := []struct {
		name, code string
		assertion  string
		kv         []string
		says       string // in the description
	}{
		{"replayed jti", ErrInvalidGrant, replayed, nil, "already used"},
		{"unregistered key", ErrInvalidGrant, h.assertion(t, "stranger-bot", h.strangerBotKey, nil), nil, "not a registered agent"},
		{"another agent's key", ErrInvalidGrant, h.assertion(t, "alice-bot", h.bobBotKey, nil), nil, "signature"},
		{"unregistered key claiming a registered agent", ErrInvalidGrant, h.assertion(t, "alice-bot", h.strangerBotKey, nil), nil, "signature"},
		{"wrong aud", ErrInvalidGrant, h.assertion(t, "alice-bot", h.aliceBotKey, func(c jwt.MapClaims) { c["aud"] = oauthIssuer }), nil, "aud"},
		{"exp too far", ErrInvalidGrant, h.assertion(t, "alice-bot", h.aliceBotKey, func(c jwt.MapClaims) {
			c["exp"] = h.clock.Now().Add(MaxAssertionAhead + time.Minute).Unix()
		}), nil, "exp is more than"},
		{"expired", ErrInvalidGrant, h.assertion(t, "alice-bot", h.aliceBotKey, func(c jwt.MapClaims) {
			c["exp"] = h.clock.Now().Add(-time.Hour).Unix()
		}), nil, "expired"},
		{"no exp", ErrInvalidGrant, h.assertion(t, "alice-bot", h.aliceBotKey, func(c jwt.MapClaims) { delete(c, "exp") }), nil, "exp is required"},
		{"no jti", ErrInvalidGrant, h.assertion(t, "alice-bot", h.aliceBotKey, func(c jwt.MapClaims) { delete(c, "jti") }), nil, "jti"},
		{"no iat", ErrInvalidGrant, h.assertion(t, "alice-bot", h.aliceBotKey, func(c jwt.MapClaims) { delete(c, "iat") }), nil, "iat"},
		{"sub not iss", ErrInvalidGrant, h.assertion(t, "alice-bot", h.aliceBotKey, func(c jwt.MapClaims) { c["sub"] = "bob-bot" }), nil, "iss and sub"},
		{"not a JWT", ErrInvalidGrant, "not-a-jwt", nil, "malformed"},
		{"no assertion", ErrInvalidRequest, "", nil, "assertion is required"},
		{"scope beyond the grant", ErrInvalidScope, h.assertion(t, "alice-bot", h.aliceBotKey, nil), []string{"scope", "orders:read profile"}, `"profile" was not granted`},
		{"empty scope", ErrInvalidScope, h.assertion(t, "alice-bot", h.aliceBotKey, nil), []string{"scope", " "}, "scope is empty"},
		{"resource not granted", ErrInvalidTarget, h.assertion(t, "alice-bot", h.aliceBotKey, nil), []string{"resource", apiResource}, "resource"},
		{"a client the human did not grant", ErrInvalidGrant, h.assertion(t, "alice-bot", h.aliceBotKey, nil), []string{"client_id", "other", "client_secret", "other-secret"}, "not let it act for this client"},
		{"wrong client secret", ErrInvalidClient, h.assertion(t, "alice-bot", h.aliceBotKey, nil), []string{"client_secret", "wrong"}, "client authentication"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := h.agentToken(tc.assertion, tc.kv...)
			oe, ok := asOAuthErr(err)
			if !ok || oe.Code != tc.code || !strings.Contains(oe.Description, tc.says) {
				t.Fatalf("agent token = %+v, %v; want %s saying %q", resp, err, tc.code, tc.says)
			}
		})
	}
}

func TestActorTokenRefusedOnceTheAgentIsRemoved(t *testing.T) {
	h := newActorHarness(t)
	h.consent(t, "alice", "alice-bot")
	h.agents.remove("alice-bot")
	_, err := h.agentToken(h.assertion(t, "alice-bot", h.aliceBotKey, nil))
	if oe, ok := asOAuthErr(err); !ok || oe.Code != ErrInvalidGrant {
		t.Fatalf("agent token of a removed agent = %v; want invalid_grant", err)
	}
	// Registered again (same deviceId, a new key) under another person: alice's
	// grant does not carry over to bob.
	key := h.agents.register(t, "alice-bot", h.bob)
	_, err = h.agentToken(h.assertion(t, "alice-bot", key, nil))
	if oe, ok := asOAuthErr(err); !ok || oe.Code != ErrInvalidGrant {
		t.Fatalf("agent token of a re-registered agent = %v; want invalid_grant", err)
	}
}

func TestActorTokenPublicClient(t *testing.T) {
	h := newActorHarness(t)
	ar := h.authorize(t, url.Values{
		"response_type": {"code"}, "client_id": {"spa"}, "redirect_uri": {spaRedirect}, "scope": {"openid"},
		"code_challenge": {strings.Repeat("c", 43)}, "code_challenge_method": {"S256"}, RequestedActorParam: {"alice-bot"},
	})
	h.scan(t, ar, "alice")
	if r, err := h.svc.Finish(context.Background(), ar.ID, testBinding); err != nil || r.Code == "" {
		t.Fatalf("Finish = %+v, %v", r, err)
	}
	p := url.Values{"grant_type": {GrantTypeJWTBearer}, "assertion": {h.assertion(t, "alice-bot", h.aliceBotKey, nil)}, "client_id": {"spa"}}
	resp, err := h.svc.Token(context.Background(), ClientRequest{Params: p})
	if err != nil || resp.AccessToken == "" {
		t.Fatalf("public client's agent token = %+v, %v", resp, err)
	}
}

// Claims of an agent's token survive the verifier's cache and a fresh parse alike.
var _ = bearer.ActorProfileAgent

// TestFinishLooksUpTheAgentOnce: the login page's polls of a pending login, and
// plain logins, cost no lookup of an agent; a verified login naming an agent
// looks its owner up once.
func TestFinishLooksUpTheAgentOnce(t *testing.T) {
	ctx := context.Background()
	h := newActorHarness(t)
	plain := h.authorize(t, params())
	withAgent := h.authorize(t, params(RequestedActorParam, "alice-bot"))
	for range 3 { // the page polls while the scan is pending
		for _, ar := range []*AuthRequest{plain, withAgent} {
			if r, err := h.svc.Finish(ctx, ar.ID, testBinding); r != nil || err != nil {
				t.Fatalf("pending Finish = %+v, %v", r, err)
			}
		}
	}
	h.scan(t, plain, "alice")
	if r, err := h.svc.Finish(ctx, plain.ID, testBinding); err != nil || r.Code == "" {
		t.Fatalf("plain login: %+v, %v", r, err)
	}
	if n := h.agents.lookups; n != 0 {
		t.Fatalf("%d agent lookups before any login named a verified agent; want 0", n)
	}
	h.scan(t, withAgent, "alice")
	if r, err := h.svc.Finish(ctx, withAgent.ID, testBinding); err != nil || r.Code == "" {
		t.Fatalf("login with alice-bot: %+v, %v", r, err)
	}
	if n := h.agents.lookups; n != 1 {
		t.Fatalf("%d agent lookups for one verified login naming an agent; want 1", n)
	}
}

package oidc

import (
	"bytes"
	"context"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/memstore"
)

// clientReads wraps a Store, counting its reads of dynamic client records (keys
// under oidc/client/): Gets and iterations in transactions, and ReadKeys. It also
// counts the rounds of reads of its Updates: each Get that neither a Prefetch nor a
// write of the transaction covered, and each Prefetch asking for a key not known
// yet (on a database server, a round trip each).
type clientReads struct {
	storage.Store
	reads  atomic.Int64
	rounds atomic.Int64
	mu     sync.Mutex
	// beforeUpdate, when set, runs once before the next Update starts.
	beforeUpdate func()
}

func (c *clientReads) count(key []byte) {
	if bytes.HasPrefix(key, clientPrefix()) || bytes.HasPrefix(clientPrefix(), key) {
		c.reads.Add(1)
	}
}

func (c *clientReads) ReadKey(ctx context.Context, key []byte) ([]byte, error) {
	c.count(key)
	return storage.ReadKey(ctx, c.Store, key)
}

func (c *clientReads) View(ctx context.Context, fn func(storage.Txn) error) error {
	return c.Store.View(ctx, func(txn storage.Txn) error { return fn(&countedTxn{Txn: txn, c: c}) })
}

func (c *clientReads) Update(ctx context.Context, fn func(storage.Txn) error) error {
	c.mu.Lock()
	before := c.beforeUpdate
	c.beforeUpdate = nil
	c.mu.Unlock()
	if before != nil {
		before()
	}
	return c.Store.Update(ctx, func(txn storage.Txn) error {
		return fn(&countedTxn{Txn: txn, c: c, known: map[string]bool{}})
	})
}

type countedTxn struct {
	storage.Txn
	c     *clientReads
	known map[string]bool // keys prefetched or written; nil in a View
}

func (t *countedTxn) Get(key []byte) ([]byte, error) {
	t.c.count(key)
	if t.known != nil && !t.known[string(key)] {
		t.c.rounds.Add(1)
	}
	return t.Txn.Get(key)
}

func (t *countedTxn) Prefetch(keys ...[]byte) error {
	asks := false
	for _, k := range keys {
		asks = asks || !t.known[string(k)]
		if t.known != nil {
			t.known[string(k)] = true
		}
	}
	if asks {
		t.c.rounds.Add(1)
	}
	return storage.Prefetch(t.Txn, keys...)
}

func (t *countedTxn) Set(key, value []byte, ttl time.Duration) error {
	if t.known != nil {
		t.known[string(key)] = true
	}
	return t.Txn.Set(key, value, ttl)
}

func (t *countedTxn) Delete(key []byte) error {
	if t.known != nil {
		t.known[string(key)] = true
	}
	return t.Txn.Delete(key)
}

func (t *countedTxn) Iterate(prefix []byte, fn func(k, v []byte) (bool, error)) error {
	t.c.count(prefix)
	return t.Txn.Iterate(prefix, fn)
}

func (t *countedTxn) IterateKeys(prefix []byte, fn func(k []byte) (bool, error)) error {
	t.c.count(prefix)
	return t.Txn.IterateKeys(prefix, fn)
}

// tokenRequest is a token request authenticated with client_secret_post.
func tokenRequest(id, secret string, kv ...string) ClientRequest {
	p := url.Values{"client_id": {id}, "client_secret": {secret}}
	for i := 0; i+1 < len(kv); i += 2 {
		p.Set(kv[i], kv[i+1])
	}
	return ClientRequest{Params: p}
}

// TestTokenReadsClientOnce: a token request reads its client once: a dynamic one
// from the store, in the transaction that issues the tokens, in the same round as
// the code or grant (issue 19, item 3); a static one not at all.
func TestTokenReadsClientOnce(t *testing.T) {
	store := &clientReads{Store: memstore.New()}
	h := newHarnessOn(t, store, testSecret)
	ctx := context.Background()
	ci, secret := h.createClient(t, "", appRedirect)
	for _, tc := range []struct {
		name, id, secret string
		want             int64
	}{
		{"dynamic client", ci.ID, secret, 1},
		{"static client", "app", "app-secret", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := h.login(t, params("client_id", tc.id, "scope", "openid offline_access"), "alice")
			store.reads.Store(0)
			store.rounds.Store(0)
			resp, err := h.svc.Token(ctx, tokenRequest(tc.id, tc.secret,
				"grant_type", "authorization_code", "code", l.code, "redirect_uri", appRedirect))
			if err != nil {
				t.Fatalf("code exchange: %v", err)
			}
			if n := store.reads.Load(); n != tc.want {
				t.Errorf("the code exchange read the client %d times, want %d", n, tc.want)
			}
			if n := store.rounds.Load(); n != 1 {
				t.Errorf("the code exchange's transaction read in %d rounds, want 1 (the code with the client)", n)
			}
			store.reads.Store(0)
			store.rounds.Store(0)
			if _, err := h.svc.Token(ctx, tokenRequest(tc.id, tc.secret,
				"grant_type", "refresh_token", "refresh_token", resp.RefreshToken)); err != nil {
				t.Fatalf("refresh: %v", err)
			}
			if n := store.reads.Load(); n != tc.want {
				t.Errorf("the refresh read the client %d times, want %d", n, tc.want)
			}
			if n := store.rounds.Load(); n != 1 {
				t.Errorf("the refresh's transaction read in %d rounds, want 1 (the grant with the client)", n)
			}
		})
	}
}

// TestTokenClientDeletedMeanwhile: a dynamic client deleted after its token
// request was read, before the transaction that would issue its tokens, gets
// invalid_client and no tokens, and no grant is written (a grant written after the
// deletion's revocation scan would outlive the client).
func TestTokenClientDeletedMeanwhile(t *testing.T) {
	store := &clientReads{Store: memstore.New()}
	h := newHarnessOn(t, store, testSecret)
	ctx := context.Background()
	for _, grantType := range []string{"authorization_code", "refresh_token"} {
		t.Run(grantType, func(t *testing.T) {
			ci, secret := h.createClient(t, "", appRedirect)
			l := h.login(t, params("client_id", ci.ID, "scope", "openid offline_access"), "alice")
			req := tokenRequest(ci.ID, secret, "grant_type", grantType, "code", l.code, "redirect_uri", appRedirect)
			if grantType == "refresh_token" {
				first, err := h.svc.Token(ctx, tokenRequest(ci.ID, secret,
					"grant_type", "authorization_code", "code", l.code, "redirect_uri", appRedirect))
				if err != nil {
					t.Fatal(err)
				}
				req = tokenRequest(ci.ID, secret, "grant_type", grantType, "refresh_token", first.RefreshToken)
			}
			grants := h.count(t, string(grantPrefix()))
			store.mu.Lock()
			store.beforeUpdate = func() {
				if err := h.svc.Clients().Delete(ctx, ci.ID, ""); err != nil {
					t.Errorf("deleting the client: %v", err)
				}
			}
			store.mu.Unlock()
			resp, err := h.svc.Token(ctx, req)
			if resp != nil {
				t.Fatal("tokens issued to a deleted client")
			}
			wantError(t, err, ErrInvalidClient)
			if n := h.count(t, string(grantPrefix())); n != grants {
				t.Errorf("%d grants after the refused request, want %d", n, grants)
			}
		})
	}
}

// TestTokenAuthenticationFirst: a request with a dynamic client's id but not its
// secret gets invalid_client whatever else is wrong with it, as when the client was
// authenticated first: it learns nothing of a code or a refresh token.
func TestTokenAuthenticationFirst(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ci, secret := h.createClient(t, "", appRedirect)
	l := h.login(t, params("client_id", ci.ID, "scope", "openid offline_access"), "alice")
	resp, err := h.svc.Token(ctx, tokenRequest(ci.ID, secret, "grant_type", "authorization_code", "code", l.code, "redirect_uri", appRedirect))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		params []string
		want   string // with the right secret
	}{
		{"no grant_type", nil, ErrInvalidRequest},
		{"unknown grant_type", []string{"grant_type", "password"}, ErrUnsupportedGrantType},
		{"no code", []string{"grant_type", "authorization_code", "redirect_uri", appRedirect}, ErrInvalidRequest},
		{"no redirect_uri", []string{"grant_type", "authorization_code", "code", "x"}, ErrInvalidRequest},
		{"malformed code_verifier", []string{"grant_type", "authorization_code", "code", "x", "redirect_uri", appRedirect, "code_verifier", "short"}, ErrInvalidRequest},
		{"unknown code", []string{"grant_type", "authorization_code", "code", "x", "redirect_uri", appRedirect}, ErrInvalidGrant},
		{"no refresh_token", []string{"grant_type", "refresh_token"}, ErrInvalidRequest},
		{"forged refresh_token", []string{"grant_type", "refresh_token", "refresh_token", "x.y.z"}, ErrInvalidGrant},
		{"bad scope", []string{"grant_type", "refresh_token", "refresh_token", resp.RefreshToken, "scope", "a\"b"}, ErrInvalidScope},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.svc.Token(ctx, tokenRequest(ci.ID, secret+"x", tc.params...))
			wantError(t, err, ErrInvalidClient)
			_, err = h.svc.Token(ctx, tokenRequest(ci.ID, secret, tc.params...))
			wantError(t, err, tc.want)
		})
	}
	// The refresh token, refused above for the wrong secret, still works.
	if _, err := h.svc.Token(ctx, tokenRequest(ci.ID, secret, "grant_type", "refresh_token", "refresh_token", resp.RefreshToken)); err != nil {
		t.Errorf("refresh after the refused requests: %v", err)
	}
}

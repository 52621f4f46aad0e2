package oidc

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/core/records"
	"github.com/palmgate/palmgate/internal/keystest"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/badgerstore"
)

// The fuzz targets of the OAuth endpoints' outside input: the authorization request
// (FuzzAuthorize, here) and the token request form (FuzzTokenForm, in
// token_fuzz_test.go). Each opens one Badger store for the whole run, in its setup,
// and checks after every refused input that the store is unchanged.

const (
	fuzzIssuer   = "https://id.example.test"
	fuzzRedirect = "https://app.example.test/cb"
	fuzzLoopback = "http://127.0.0.1:8080/callback?tenant=1"
	fuzzOtherURI = "https://other.example.test/cb"
)

var fuzzClients = []Client{
	{ID: "app", Secret: "app-secret", RedirectURIs: []string{fuzzRedirect, fuzzLoopback}, Name: "Example App",
		Scopes: []string{"openid", "offline_access", "profile"}, Resources: []string{"https://api.example.test"}},
	{ID: "other", Secret: "other-secret", RedirectURIs: []string{fuzzOtherURI}},
}

// fuzzProvider is a Service on a real Badger store with a dev palm service, on the
// real clock (the store's TTLs use it).
type fuzzProvider struct {
	store storage.Store
	palm  *palm.Service
	svc   *Service
}

func newFuzzProvider(f *testing.F) *fuzzProvider {
	f.Helper()
	ctx := context.Background()
	store, err := badgerstore.Open(f.TempDir(), zap.NewNop())
	if err != nil {
		f.Fatalf("badgerstore.Open: %v", err)
	}
	f.Cleanup(func() { _ = store.Close() })
	p := &fuzzProvider{store: store}
	if p.palm, err = palm.NewService(palm.Config{Store: store, Issuer: fuzzIssuer, Dev: true}); err != nil {
		f.Fatalf("palm.NewService: %v", err)
	}
	set, err := keys.Open(ctx, store, nil, keys.WithGenerator(keystest.Generator))
	if err != nil {
		f.Fatalf("keys.Open: %v", err)
	}
	p.svc, err = NewService(ctx, Config{
		Store: store, Palm: p.palm, Keys: set, Issuer: fuzzIssuer, Clients: fuzzClients,
		PairwiseSecret: "pairwise-secret-for-fuzzing-0123456789",
		AccessTTL:      time.Hour, RefreshTTL: 2160 * time.Hour,
		// Long enough for the live code of FuzzTokenForm to outlive any fuzz run.
		CodeTTL: 24 * time.Hour, LoginTTL: 10 * time.Minute,
	})
	if err != nil {
		f.Fatalf("NewService: %v", err)
	}
	return p
}

// storeState is what a refused input must leave unchanged: the record counts by
// kind (storage.CountByKind) and a digest of every live key and value.
type storeState struct {
	counts map[string]int
	digest [sha256.Size]byte
}

func (p *fuzzProvider) state(t *testing.T) storeState {
	t.Helper()
	ctx := context.Background()
	counts, err := storage.CountByKind(ctx, p.store, records.Kind)
	if err != nil {
		t.Fatalf("CountByKind: %v", err)
	}
	h := sha256.New()
	err = p.store.View(ctx, func(txn storage.Txn) error {
		h.Reset()
		return txn.Iterate(nil, func(key, value []byte) (bool, error) {
			for _, b := range [][]byte{key, value} {
				h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(b))))
				h.Write(b)
			}
			return true, nil
		})
	})
	if err != nil {
		t.Fatalf("reading the store: %v", err)
	}
	st := storeState{counts: counts}
	h.Sum(st.digest[:0])
	return st
}

// unchanged fails when the store changed between before and after.
func unchanged(t *testing.T, before, after storeState, what string) {
	t.Helper()
	if !maps.Equal(before.counts, after.counts) {
		t.Fatalf("%s changed the record counts: %v -> %v", what, before.counts, after.counts)
	}
	if before.digest != after.digest {
		t.Fatalf("%s changed stored records (counts %v)", what, after.counts)
	}
}

// wantOAuthError fails unless err is an OAuth refusal with one of codes, and
// returns it.
func wantOAuthError(t *testing.T, err error, codes ...string) *oauthErr {
	t.Helper()
	oe, ok := asOAuthErr(err)
	if !ok {
		t.Fatalf("error %v (%T) is not an OAuth fault: the edge would answer 500", err, err)
	}
	if !slices.Contains(codes, oe.Code) {
		t.Fatalf("error code %q (%s), want one of %v", oe.Code, oe.Description, codes)
	}
	if oe.Description == "" {
		t.Fatalf("error %s has no description", oe.Code)
	}
	return oe
}

// FuzzAuthorize: Authorize, on the parameters the edge reads from any query, never
// panics; every error is an *Error with an authorization error code; an error goes
// back to the client exactly when its client and redirect_uri are valid, with the
// state only when it is valid, in query mode or the form_post asked; a refused
// request writes nothing; an accepted one
// is well-formed and writes exactly its request and its palm challenge.
func FuzzAuthorize(f *testing.F) {
	p := newFuzzProvider(f)
	ctx := context.Background()
	f.Add("response_type=code&client_id=app&redirect_uri=" + url.QueryEscape(fuzzRedirect) + "&scope=openid&state=s&nonce=n")
	f.Add("response_type=code&client_id=app&redirect_uri=" + url.QueryEscape(fuzzRedirect) + "&scope=openid&prompt=none&state=s")
	f.Add("response_type=code&client_id=app&redirect_uri=" + url.QueryEscape(fuzzRedirect) + "&scope=openid+email+phone&state=s") // standard scopes (issue 21)

	f.Fuzz(func(t *testing.T, rawQuery string) {
		params, _ := url.ParseQuery(rawQuery) // the edge's r.URL.Query() ignores the error too
		before := p.state(t)
		ar, err := p.svc.Authorize(ctx, params, testBrowser)
		after := p.state(t)
		clientID, redirectURI := params.Get("client_id"), params.Get("redirect_uri")
		cl := p.svc.clients.get(clientID)
		validTarget := cl != nil && cl.allowsRedirect(redirectURI)
		if err != nil {
			if ar != nil {
				t.Fatalf("Authorize returned a request and an error: %v", err)
			}
			oe := wantOAuthError(t, err, ErrInvalidRequest, ErrUnsupportedResponseType, ErrInvalidScope, ErrInvalidTarget, ErrLoginRequired,
				ErrRequestNotSupported, ErrRequestURINotSupported)
			unchanged(t, before, after, fmt.Sprintf("refused request (%s: %s)", oe.Code, oe.Description))
			// Once the client and its redirect_uri are valid, every refusal goes back
			// there; before, none does.
			goesBack := validTarget && len(params["client_id"]) == 1 && len(params["redirect_uri"]) == 1
			if goesBack != (oe.RedirectURI != "") {
				t.Fatalf("error %s (%s) redirects to %q; client %q, redirect_uri %q: want a redirect exactly when both are valid",
					oe.Code, oe.Description, oe.RedirectURI, clientID, redirectURI)
			}
			if oe.RedirectURI != "" {
				wantState := ""
				if st := params["state"]; len(st) == 1 && len(st[0]) <= MaxStateLen {
					wantState = st[0]
				}
				if oe.RedirectURI != redirectURI || oe.State != wantState {
					t.Fatalf("error redirects to %q with state %q, asked %q and %q", oe.RedirectURI, oe.State, redirectURI, params["state"])
				}
				formPost := slices.Equal(params["response_mode"], []string{ResponseModeFormPost})
				if oe.ResponseMode != ResponseModeQuery && !(formPost && oe.ResponseMode == ResponseModeFormPost) {
					t.Fatalf("error answered in response mode %q, asked %q", oe.ResponseMode, params["response_mode"])
				}
			}
			return
		}

		for name, values := range params {
			if len(values) != 1 {
				t.Fatalf("accepted parameter %s given %d times", name, len(values))
			}
		}
		if !validTarget || ar.ClientID != clientID || ar.RedirectURI != redirectURI {
			t.Fatalf("accepted client %q and redirect_uri %q", clientID, redirectURI)
		}
		if params.Get("response_type") != "code" {
			t.Fatalf("accepted response_type %q", params.Get("response_type"))
		}
		if !slices.Contains(ar.Scopes, ScopeOpenID) || !slices.IsSorted(ar.Scopes) || len(slices.Compact(slices.Clone(ar.Scopes))) != len(ar.Scopes) {
			t.Fatalf("accepted scopes %q", ar.Scopes)
		}
		for _, sc := range ar.Scopes {
			if !scopeToken.MatchString(sc) || !slices.Contains(strings.Fields(params.Get("scope")), sc) {
				t.Fatalf("scope %q was not asked as a valid scope token", sc)
			}
		}
		if ar.Resource != params.Get("resource") || (ar.Resource != "" && !slices.Contains(cl.resources, ar.Resource)) {
			t.Fatalf("accepted resource %q, asked %q", ar.Resource, params.Get("resource"))
		}
		for _, sc := range ar.Scopes {
			if !slices.Contains(cl.scopes, sc) && !slices.Contains(StandardScopes, sc) {
				t.Fatalf("granted scope %q the client may not ask for (neither configured nor standard)", sc)
			}
		}
		if ar.State != params.Get("state") || len(ar.State) > MaxStateLen || ar.Nonce != params.Get("nonce") || len(ar.Nonce) > MaxNonceLen {
			t.Fatalf("request state %q / nonce %q, asked %q / %q", ar.State, ar.Nonce, params.Get("state"), params.Get("nonce"))
		}
		if ar.CodeChallenge != "" && (!pkceString.MatchString(ar.CodeChallenge) || params.Get("code_challenge_method") != pkceS256) {
			t.Fatalf("accepted code_challenge %q with method %q", ar.CodeChallenge, params.Get("code_challenge_method"))
		}
		if ar.CodeChallenge != params.Get("code_challenge") || ar.Status != RequestPending || ar.ChallengeID == "" {
			t.Fatalf("accepted request %+v", ar)
		}
		want := maps.Clone(before.counts)
		want["oidc/ar"]++
		want["palm/c"]++
		if !maps.Equal(after.counts, want) {
			t.Fatalf("an accepted request changed the record counts %v -> %v, want %v", before.counts, after.counts, want)
		}
		// Remove what it stored, so that the store does not grow with the run.
		err = p.store.Update(ctx, func(txn storage.Txn) error {
			if err := txn.Delete(authRequestKey(ar.ID)); err != nil {
				return err
			}
			return txn.Delete([]byte("palm/c/" + ar.ChallengeID))
		})
		if err != nil {
			t.Fatalf("removing the request: %v", err)
		}
		unchanged(t, before, p.state(t), "an accepted request, once removed,")
	})
}

package bearer

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// maxDocumentBytes bounds the discovery document and the JWKS read from an issuer.
const maxDocumentBytes = 1 << 20

// RemoteKeys fetches an issuer's signing keys over HTTP(S): discovery, then its
// jwks_uri. Keys are cached; an unknown `kid` refetches them, at most once per
// MinRefetch, and cached keys keep working while the issuer is down.
type RemoteKeys struct {
	issuer     string
	client     *http.Client
	minRefetch time.Duration
	now        func() time.Time

	fetchMu sync.Mutex // serializes fetches; jwksURI is guarded by it
	jwksURI string

	mu        sync.RWMutex
	keys      map[string]remoteKey
	lastFetch time.Time
	lastErr   error // of the last fetch
}

type remoteKey struct {
	key crypto.PublicKey
	alg string
}

// NewRemoteKeys builds a key source for issuer (the OIDC issuer identifier, such as
// https://id.example.com/oauth2). client should have a timeout.
func NewRemoteKeys(issuer string, client *http.Client, minRefetch time.Duration, now func() time.Time) *RemoteKeys {
	if now == nil {
		now = time.Now
	}
	return &RemoteKeys{issuer: strings.TrimSuffix(issuer, "/"), client: client, minRefetch: minRefetch, now: now}
}

// Key returns the key with id kid, fetching the key set when kid is unknown and the
// last fetch is older than MinRefetch. Requests for known keys never wait for a fetch.
func (r *RemoteKeys) Key(ctx context.Context, kid string) (crypto.PublicKey, string, error) {
	if k, ok := r.lookup(kid); ok {
		return k.key, k.alg, nil
	}
	r.fetchMu.Lock()
	defer r.fetchMu.Unlock()
	if k, ok := r.lookup(kid); ok { // fetched while we waited
		return k.key, k.alg, nil
	}
	r.mu.RLock()
	recent := !r.lastFetch.IsZero() && r.now().Sub(r.lastFetch) < r.minRefetch
	lastErr := r.lastErr
	r.mu.RUnlock()
	if recent {
		if lastErr != nil { // the key set may be stale: we cannot tell a new key from a forged one
			return nil, "", fmt.Errorf("%w: %v", ErrIssuerUnavailable, lastErr)
		}
		return nil, "", fmt.Errorf("%w: unknown key id", ErrInvalidToken)
	}
	if err := r.fetch(ctx); err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrIssuerUnavailable, err)
	}
	if k, ok := r.lookup(kid); ok {
		return k.key, k.alg, nil
	}
	return nil, "", fmt.Errorf("%w: unknown key id", ErrInvalidToken)
}

func (r *RemoteKeys) lookup(kid string) (remoteKey, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	k, ok := r.keys[kid]
	return k, ok
}

// Prefetch loads the keys ahead of the first request. A failure is returned, but the
// source stays usable: it fetches again on demand.
func (r *RemoteKeys) Prefetch(ctx context.Context) error {
	r.fetchMu.Lock()
	defer r.fetchMu.Unlock()
	return r.fetch(ctx)
}

// fetch reads discovery (once) and the key set, and records the outcome. Called with
// fetchMu held.
func (r *RemoteKeys) fetch(ctx context.Context) error {
	keys, err := r.fetchKeys(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastFetch, r.lastErr = r.now(), err
	if err == nil {
		r.keys = keys
	}
	return err
}

func (r *RemoteKeys) fetchKeys(ctx context.Context) (map[string]remoteKey, error) {
	if r.jwksURI == "" {
		var doc struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := r.getJSON(ctx, r.issuer+"/.well-known/openid-configuration", &doc); err != nil {
			return nil, fmt.Errorf("discovery: %w", err)
		}
		if doc.Issuer != r.issuer || doc.JWKSURI == "" {
			return nil, fmt.Errorf("discovery document names issuer %q (want %q) and jwks_uri %q", doc.Issuer, r.issuer, doc.JWKSURI)
		}
		r.jwksURI = doc.JWKSURI
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := r.getJSON(ctx, r.jwksURI, &set); err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	keys := make(map[string]remoteKey, len(set.Keys))
	for _, raw := range set.Keys {
		kid, k, err := parseJWK(raw)
		if err != nil {
			continue // a key we cannot use signs nothing we accept
		}
		keys[kid] = k
	}
	return keys, nil
}

func (r *RemoteKeys) getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, maxDocumentBytes)).Decode(v)
}

// parseJWK parses one public JSON Web Key (go-jose checks the encodings, the
// coordinate sizes and that an EC point is on its curve): EC P-256, RSA of 2048
// bits or more, or OKP Ed25519, with its `alg` (implied by the key type when
// absent, except for RSA, which must say). A JWK that carries private material is
// refused: anyone who read the JWKS could sign with it.
func parseJWK(raw []byte) (string, remoteKey, error) {
	var j jose.JSONWebKey
	if err := j.UnmarshalJSON(raw); err != nil {
		return "", remoteKey{}, err
	}
	if j.Use != "" && j.Use != "sig" {
		return "", remoteKey{}, errors.New("not a signing key")
	}
	if !j.IsPublic() {
		return "", remoteKey{}, errors.New("a private key in a JWKS")
	}
	switch k := j.Key.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return "", remoteKey{}, errors.New("bad EC key: not P-256")
		}
		return j.KeyID, remoteKey{key: k, alg: orDefault(j.Algorithm, "ES256")}, nil
	case *rsa.PublicKey:
		// go-jose keeps only the low 64 bits of e: bound its length first.
		var e struct {
			E string `json:"e"`
		}
		_ = json.Unmarshal(raw, &e) // UnmarshalJSON above read the same JSON
		if j.Algorithm == "" || k.N.BitLen() < 2048 || len(e.E) > 6 || k.E < 3 {
			return "", remoteKey{}, errors.New("bad RSA key")
		}
		return j.KeyID, remoteKey{key: k, alg: j.Algorithm}, nil
	case ed25519.PublicKey:
		return j.KeyID, remoteKey{key: k, alg: orDefault(j.Algorithm, "EdDSA")}, nil
	}
	return "", remoteKey{}, fmt.Errorf("unsupported key type %T", j.Key)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

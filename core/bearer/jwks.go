package bearer

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"time"
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

// parseJWK parses one public JSON Web Key: EC P-256, RSA or OKP Ed25519, with its
// `alg` (implied by the key type when absent, except for RSA, which must say).
func parseJWK(raw []byte) (string, remoteKey, error) {
	var j struct {
		Kty, Use, Alg, Kid, Crv, X, Y, N, E string
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		return "", remoteKey{}, err
	}
	if j.Use != "" && j.Use != "sig" {
		return "", remoteKey{}, errors.New("not a signing key")
	}
	b64 := base64.RawURLEncoding.DecodeString
	switch j.Kty {
	case "EC":
		x, err1 := b64(j.X)
		y, err2 := b64(j.Y)
		if j.Crv != "P-256" || err1 != nil || err2 != nil || len(x) != 32 || len(y) != 32 {
			return "", remoteKey{}, errors.New("bad EC key")
		}
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		if err != nil {
			return "", remoteKey{}, err
		}
		return j.Kid, remoteKey{key: pub, alg: orDefault(j.Alg, "ES256")}, nil
	case "RSA":
		n, err1 := b64(j.N)
		e, err2 := b64(j.E)
		if err1 != nil || err2 != nil || len(n) < 256 || len(e) == 0 || len(e) > 4 || j.Alg == "" {
			return "", remoteKey{}, errors.New("bad RSA key")
		}
		return j.Kid, remoteKey{key: &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}, alg: j.Alg}, nil
	case "OKP":
		x, err := b64(j.X)
		if j.Crv != "Ed25519" || err != nil || len(x) != ed25519.PublicKeySize {
			return "", remoteKey{}, errors.New("bad OKP key")
		}
		return j.Kid, remoteKey{key: ed25519.PublicKey(x), alg: orDefault(j.Alg, "EdDSA")}, nil
	}
	return "", remoteKey{}, fmt.Errorf("unsupported key type %q", j.Kty)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

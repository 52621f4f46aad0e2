// Package keys keeps palmgate's token signing keys in the store, so that every
// instance and every restart signs and verifies with the same keys, and publishes
// their public halves as a JSON Web Key Set.
package keys

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/fips140"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/storage"
)

// Algorithms palmgate signs with.
const (
	RS256 = "RS256" // ID tokens by default: OpenID Connect's mandatory algorithm
	ES256 = "ES256" // access and refresh tokens; ID tokens of clients that ask for it
	EdDSA = "EdDSA" // Ed25519 (RFC 8037): ID tokens of clients that ask for it
)

// Algorithms are the algorithms of the key set: each has one active key, generated
// on first start, and all rotate together.
var Algorithms = []string{RS256, ES256, EdDSA}

// rsaBits is the size of generated RSA keys.
const rsaBits = 2048

// The storage layout of this package:
//
//	keys/{alg}/{kid} -> signing key (JSON: kid, alg, PKCS#8 DER, created, active,
//	                    retired)
//	keylock/{alg}    -> kid of the last key created for alg
//
// One key per algorithm is active (signs); the retired ones stay published so that
// tokens they signed keep verifying until they expire, and are then deleted (see
// retire.go). Every key creation reads and writes keylock/{alg}, so that concurrent
// creations conflict and the store runs the loser again: a prefix scan that finds
// no key conflicts with nothing.
func keyPrefix(alg string) []byte   { return []byte("keys/" + alg + "/") }
func keyKey(alg, kid string) []byte { return []byte("keys/" + alg + "/" + kid) }
func keysPrefix() []byte            { return []byte("keys/") }
func keyLockKey(alg string) []byte  { return []byte("keylock/" + alg) }

// Key is one signing key.
type Key struct {
	ID        string
	Algorithm string
	Private   crypto.Signer
	Created   time.Time
	Active    bool
	// Retired is when the key stopped being active; zero while it is active (and
	// for a retired key whose retirement cannot be told, which is kept).
	Retired time.Time
	// DropsAt is when the retired key leaves the JWKS and the store: every token it
	// signed has expired by then (see WithLifetimes). Zero: it is kept.
	DropsAt time.Time

	own *OwnES256Key // an ES256 key's verification key (ownverify.go); nil for the others
}

// Public is the key's public half.
func (k *Key) Public() crypto.PublicKey { return k.Private.Public() }

// verificationKey is what verifies the key's tokens: an ES256 key's OwnES256Key,
// or the public key.
func (k *Key) verificationKey() crypto.PublicKey {
	if k.own != nil {
		return k.own
	}
	return k.Public()
}

// withOwn sets k's OwnES256Key when k is an ES256 key. In FIPS 140-3 mode
// (GODEBUG=fips140=on) it sets none: every verification then goes through the
// validated module's ECDSA, as the shortcut's arithmetic is outside it.
func (k *Key) withOwn() (*Key, error) {
	priv, ok := k.Private.(*ecdsa.PrivateKey)
	if k.Algorithm != ES256 || !ok {
		return k, nil
	}
	if fips140.Enabled() {
		if err := onP256(priv); err != nil {
			return nil, fmt.Errorf("key %s: %w", k.ID, err)
		}
		return k, nil
	}
	own, err := newOwnES256Key(priv)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", k.ID, err)
	}
	k.own = own
	return k, nil
}

// Method is the JWT signing method of the key.
func (k *Key) Method() jwt.SigningMethod { return jwt.GetSigningMethod(k.Algorithm) }

type record struct {
	ID        string    `json:"kid"`
	Algorithm string    `json:"alg"`
	PKCS8     []byte    `json:"pkcs8"`
	Created   time.Time `json:"created"`
	Active    bool      `json:"active"`
	Retired   time.Time `json:"retired,omitzero"` // absent in records of earlier versions
}

// Set is the signing keys of the store, cached in memory and re-read by Watch (every
// ReloadInterval) and by Lookup (for an unknown key id).
type Set struct {
	store     storage.Store
	now       func() time.Time
	generate  Generator
	lifetimes map[string]time.Duration // of the tokens each algorithm signs (WithLifetimes)

	mu       sync.RWMutex
	active   map[string]*Key
	byKID    map[string]*Key
	tried    time.Time // of the last reload for an unknown key id
	triedErr error     // of that reload

	headers headerSegments // Sign's encoded JOSE headers
}

// Generator makes a new private key for alg (one of Algorithms).
type Generator func(alg string) (crypto.Signer, error)

// Option adjusts a Set made by Open.
type Option func(*Set)

// WithGenerator makes the Set create its keys with gen rather than from
// crypto/rand: tests hand it fixed RSA keys (internal/keystest), whose generation
// is slow.
func WithGenerator(gen Generator) Option { return func(s *Set) { s.generate = gen } }

// Open loads the key set, generating an active key per algorithm (Algorithms) on
// first start, and on the first start of a version that added an algorithm.
// Concurrent first starts of several instances agree on one key per algorithm.
func Open(ctx context.Context, store storage.Store, now func() time.Time, opts ...Option) (*Set, error) {
	if now == nil {
		now = time.Now
	}
	s := &Set{store: store, now: now, generate: generateKey}
	for _, o := range opts {
		o(s)
	}
	if err := s.Reload(ctx); err != nil {
		return nil, err
	}
	for _, alg := range Algorithms {
		if s.Active(alg) == nil {
			if _, err := s.create(ctx, alg, noneActive); err != nil {
				return nil, err
			}
		}
	}
	return s, s.Reload(ctx)
}

// Rotate makes a new key the active one for alg; the previous one is retired, and
// stays published until the tokens it signed have expired (see WithLifetimes).
func (s *Set) Rotate(ctx context.Context, alg string) (*Key, error) {
	k, err := s.create(ctx, alg, always)
	if err != nil {
		return nil, err
	}
	return k, s.Reload(ctx)
}

// A creation rule tells create, from the active keys of alg stored when its
// transaction runs, whether to store the new key k.
type creationRule func(actives []record, k *Key) bool

// noneActive creates a key only where there is none: an active key another
// instance stored meanwhile is kept (a first start).
func noneActive(actives []record, _ *Key) bool { return len(actives) == 0 }

// always replaces the active key (a rotation on demand).
func always([]record, *Key) bool { return true }

// create stores a new active key for alg, and retires the active one, when rule
// says so; it returns nil (and no error) when rule declined.
func (s *Set) create(ctx context.Context, alg string, rule creationRule) (*Key, error) {
	k, err := newKey(s.generate, alg, s.now)
	if err != nil {
		return nil, err
	}
	rec, err := k.record()
	if err != nil {
		return nil, err
	}
	stored := false
	err = s.store.Update(ctx, func(txn storage.Txn) error {
		stored = false
		if _, err := txn.Get(keyLockKey(alg)); err != nil && !errors.Is(err, storage.ErrNotFound) {
			return err
		}
		var actives []record // the active keys of alg, to be retired
		err := txn.Iterate(keyPrefix(alg), func(key, value []byte) (bool, error) {
			var r record
			if err := json.Unmarshal(value, &r); err != nil {
				return false, fmt.Errorf("decoding key %s: %w", key, err)
			}
			if r.Active {
				actives = append(actives, r)
			}
			return true, nil
		})
		if err != nil {
			return err
		}
		if !rule(actives, k) {
			return nil // another instance won the race; Reload picks its key
		}
		retired := s.now().UTC()
		for _, r := range actives {
			r.Active, r.Retired = false, retired
			b, err := json.Marshal(r)
			if err != nil {
				return err
			}
			if err := txn.Set(keyKey(alg, r.ID), b, 0); err != nil {
				return err
			}
		}
		if err := txn.Set(keyLockKey(alg), []byte(k.ID), 0); err != nil {
			return err
		}
		stored = true
		return txn.Set(keyKey(alg, k.ID), rec, 0)
	})
	if err != nil {
		return nil, fmt.Errorf("storing %s signing key: %w", alg, err)
	}
	if !stored {
		return nil, nil
	}
	return k, nil
}

// Reload reads the keys from the store (after another instance rotated them). A
// retired key past its drop time is left out, deleted or not.
func (s *Set) Reload(ctx context.Context) error {
	var recs []record
	err := s.store.View(ctx, func(txn storage.Txn) error {
		recs = recs[:0]
		return txn.Iterate(keysPrefix(), func(key, value []byte) (bool, error) {
			var r record
			if err := json.Unmarshal(value, &r); err != nil {
				return false, fmt.Errorf("loading signing key %s: %w", key, err)
			}
			recs = append(recs, r)
			return true, nil
		})
	})
	if err != nil {
		return err
	}
	active, byKID := map[string]*Key{}, map[string]*Key{}
	now := s.now()
	for i, lc := range s.lifecycles(recs) {
		if lc.dropped(now) {
			continue
		}
		k, err := parseRecord(recs[i])
		if err != nil {
			return fmt.Errorf("loading signing key %s: %w", recs[i].ID, err)
		}
		k.Retired, k.DropsAt = lc.retired, lc.drops
		byKID[k.ID] = k
		if k.Active {
			active[k.Algorithm] = k
		}
	}
	s.mu.Lock()
	s.active, s.byKID, s.triedErr = active, byKID, nil
	s.mu.Unlock()
	return nil
}

// Active returns the signing key of alg, or nil.
func (s *Set) Active(alg string) *Key {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.active[alg]
}

// ByID returns the key with id kid, or nil (also for a retired key past its drop
// time that is still loaded).
func (s *Set) ByID(kid string) *Key {
	s.mu.RLock()
	k := s.byKID[kid]
	s.mu.RUnlock()
	if k == nil || (!k.DropsAt.IsZero() && k.dropped(s.now())) { // no clock read for a key kept
		return nil
	}
	return k
}

// ReloadInterval is how often Watch re-reads the keys from the store, so that a key
// another instance sharing the store rotated in is published in the JWKS, accepted
// and, once active, used for signing here within that time.
const ReloadInterval = 2 * time.Second

// unknownKIDReload bounds how often an unknown key id reloads the keys from the store
// (another instance may have rotated them a moment ago): a flood of tokens with made
// up key ids costs at most one store read per interval.
const unknownKIDReload = time.Second

// ErrUnknownKey is returned (wrapped) by Key and Lookup for a key id that is not in
// the store.
var ErrUnknownKey = errors.New("unknown signing key")

// Watch re-reads the keys from the store every interval until ctx is done. The
// cache it refreshes allows a key rotated in by another instance to be unknown here
// for at most interval (plus one store read); that is safe because a new key only
// adds what is accepted, and an unknown key id reloads at once (Lookup). A key
// another instance deleted stays loaded here for as long, but only past its drop
// time, when ByID and JWKS already hide it. A failed read keeps the keys loaded
// before: they are the same keys, the store being their only source.
func (s *Set) Watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rctx, cancel := context.WithTimeout(ctx, interval)
			_ = s.Reload(rctx) // retried at the next tick
			cancel()
		}
	}
}

// Key returns the verification key with id kid and its algorithm (see Lookup): the
// public key, or for ES256 an OwnES256Key, which only the method OwnES256 takes.
func (s *Set) Key(ctx context.Context, kid string) (crypto.PublicKey, string, error) {
	k, err := s.Lookup(ctx, kid)
	if err != nil {
		return nil, "", err
	}
	return k.verificationKey(), k.Algorithm, nil
}

// Lookup returns the key with id kid, reloading the set from the store (at most once
// per unknownKIDReload) when kid is unknown. A failed reload is returned as is (a
// store error, storage.ErrUnavailable when the database is down), so that a token
// signed by a key this instance has not seen yet is answered "retry later" rather
// than "invalid".
func (s *Set) Lookup(ctx context.Context, kid string) (*Key, error) {
	if k := s.ByID(kid); k != nil {
		return k, nil
	}
	s.mu.Lock()
	now := s.now()
	stale := now.Sub(s.tried) >= unknownKIDReload || now.Before(s.tried)
	lastErr := s.triedErr
	if stale {
		s.tried = now
	}
	s.mu.Unlock()
	if !stale && lastErr != nil {
		// The last reload failed: this key may be a new one we cannot see yet.
		return nil, lastErr
	}
	if stale {
		err := s.Reload(ctx)
		if err != nil {
			err = fmt.Errorf("reloading signing keys: %w", err)
		}
		s.mu.Lock()
		if ctx.Err() == nil { // not this caller's own cancellation
			s.triedErr = err
		} else {
			s.tried = time.Time{}
		}
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if k := s.ByID(kid); k != nil {
			return k, nil
		}
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownKey, kid)
}

// Sign signs claims with the active key of alg, with the given `typ` header. An
// ES256 signature is always in its low-s form (see LowS): crypto/ecdsa returns
// either form, and palmgate's verifiers refuse the high one.
func (s *Set) Sign(alg, typ string, claims jwt.Claims) (string, error) {
	k := s.Active(alg)
	if k == nil {
		return "", fmt.Errorf("no active %s key", alg)
	}
	// golang-jwt's Token.SigningString, with the header encoded once (header.go).
	method := k.Method()
	header, err := s.headers.segment(method.Alg(), k.ID, typ)
	if err != nil {
		return "", fmt.Errorf("encoding %s token: %w", alg, err)
	}
	var body []byte
	if a, ok := claims.(ClaimsAppender); ok {
		body, err = a.AppendClaims(nil)
	} else {
		body, err = json.Marshal(claims)
	}
	if err != nil {
		return "", fmt.Errorf("encoding %s token: %w", alg, err)
	}
	// One buffer for the token: header, claims, then the signature (room for
	// one of up to 512 bytes, RSA-4096's).
	b64 := base64.RawURLEncoding
	token := make([]byte, 0, len(header)+1+b64.EncodedLen(len(body))+1+b64.EncodedLen(512))
	token = append(token, header...)
	token = append(token, '.')
	token = b64.AppendEncode(token, body)
	sig, err := method.Sign(string(token), k.Private)
	if err != nil {
		return "", fmt.Errorf("signing %s token: %w", alg, err)
	}
	if alg == ES256 {
		sig = NormalizeS(sig)
	}
	token = append(token, '.')
	return string(b64.AppendEncode(token, sig)), nil
}

// generateKey is the Generator of production: a fresh key from crypto/rand.
func generateKey(alg string) (crypto.Signer, error) {
	switch alg {
	case RS256:
		return rsa.GenerateKey(rand.Reader, rsaBits)
	case ES256:
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case EdDSA:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	}
	return nil, fmt.Errorf("unsupported signing algorithm %q", alg)
}

// newKey makes a new active key for alg with gen, created when gen is done.
func newKey(gen Generator, alg string, now func() time.Time) (*Key, error) {
	signer, err := gen(alg)
	if err != nil {
		return nil, fmt.Errorf("generating %s key: %w", alg, err)
	}
	k := &Key{Algorithm: alg, Private: signer, Created: now().UTC(), Active: true}
	if k.ID, err = thumbprintID(signer.Public()); err != nil {
		return nil, err
	}
	return k.withOwn()
}

// thumbprintID names a key by its RFC 7638 JWK thumbprint (SHA-256, base64url),
// which a relying party can compute from the published JWK. Keys stored by
// earlier versions keep the id they were stored with (a truncated hash of the
// DER public key): the id is read from the record, never recomputed.
func thumbprintID(pub crypto.PublicKey) (string, error) {
	sum, err := (&jose.JSONWebKey{Key: pub}).Thumbprint(crypto.SHA256)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(sum), nil
}

func (k *Key) record() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k.Private)
	if err != nil {
		return nil, fmt.Errorf("encoding %s key: %w", k.Algorithm, err)
	}
	return json.Marshal(record{ID: k.ID, Algorithm: k.Algorithm, PKCS8: der, Created: k.Created, Active: k.Active, Retired: k.Retired})
}

func parseRecord(r record) (*Key, error) {
	priv, err := x509.ParsePKCS8PrivateKey(r.PKCS8)
	if err != nil {
		return nil, err
	}
	signer, ok := priv.(crypto.Signer)
	if !ok {
		return nil, errors.New("stored key cannot sign")
	}
	return (&Key{ID: r.ID, Algorithm: r.Algorithm, Private: signer, Created: r.Created, Active: r.Active}).withOwn()
}

// JWKS returns the public keys as JSON Web Keys (RFC 7517; OKP for Ed25519 per
// RFC 8037), active ones first; a retired key past its drop time is left out.
func (s *Set) JWKS() []jose.JSONWebKey {
	now := s.now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]jose.JSONWebKey, 0, len(s.byKID))
	for _, pass := range []bool{true, false} {
		for _, k := range s.byKID {
			if k.Active == pass && !k.dropped(now) {
				out = append(out, jwkOf(k))
			}
		}
	}
	return out
}

// jwkOf is k's public JWK. go-jose writes EC coordinates at the curve's full size
// (RFC 7518 6.2.1.2) and RSA's e without leading zeros.
func jwkOf(k *Key) jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.Public(), KeyID: k.ID, Algorithm: k.Algorithm, Use: "sig"}
}

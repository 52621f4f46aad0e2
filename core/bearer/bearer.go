// Package bearer verifies palmgate access tokens for resource servers: the signature
// by one of the issuer's keys with the algorithm pinned, `typ: at+jwt`, the issuer,
// the times and the grant's revocation. Verified tokens are cached until they
// expire (by the hash of the signature segment, the header and payload compared
// in full: cache.go), so a repeated token costs no signature check.
//
// ES256 signatures are malleable: (r, n-s) verifies whenever (r, s) does, which
// makes a second string of the same token. A verifier of palmgate's own tokens
// (keys from the issuer's key set, whose signer always writes the low form) refuses
// the high form, so each token it accepts is one string. A verifier of a remote
// issuer (RemoteKeys) cannot know that the issuer normalises s (an older palmgate
// does not, nor do most JWT libraries), so it accepts both forms, as RFC 7518 does,
// and caches the claims under the low form, so that the two strings of one token
// are one cache entry. Either way the signature segment must be canonical base64url
// (no stray bits), which no encoder fails to produce.
package bearer

import (
	"context"
	"crypto"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/palmgate/palmgate/core/cachestat"
	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/storage"
)

// TokenType is the `typ` of access tokens (RFC 9068).
const TokenType = "at+jwt"

// Leeway is the default tolerance on exp of a remote issuer's tokens (palmgate_bearer
// `leeway`), the tolerance on iat and nbf of every token (a token is not refused for
// being issued "in the future" by a clock a little ahead), and the margin by which
// records about tokens outlive them. The issuer's own tokens have none on exp (see
// Config.Leeway).
const Leeway = 30 * time.Second

// ErrInvalidToken is returned (wrapped) for every token that must be refused.
var ErrInvalidToken = errors.New("invalid access token")

// ErrIssuerUnavailable is returned when keys are needed from the issuer and it
// cannot be reached; a resource server answers 503 rather than refusing the token.
var ErrIssuerUnavailable = errors.New("the token issuer is unavailable")

// KeySource finds the key that verifies a token: a public key, or a
// keys.OwnES256Key for an ES256 key of palmgate's own set (see KeyFunc).
type KeySource interface {
	// Key returns the key with id kid and its algorithm, or an error.
	Key(ctx context.Context, kid string) (crypto.PublicKey, string, error)
}

// Revocations tells whether a grant (the `sid` of a token) was revoked. It returns
// an error when it cannot tell (its copy of the revocations is too old and cannot
// be refreshed): the token is then neither admitted nor called invalid.
type Revocations interface {
	Revoked(ctx context.Context, grantID string) (bool, error)
}

// Claims are the verified claims of an access token.
type Claims struct {
	jwt.RegisteredClaims
	ClientID string `json:"client_id"`
	Scope    string `json:"scope"`
	AuthTime int64  `json:"auth_time,omitempty"`
	GrantID  string `json:"sid"`
	// Act, when set, is the agent acting for the subject (RFC 8693 4.1): the token
	// was issued to a registered agent under its human's grant (the jwt-bearer grant).
	Act *Actor `json:"act,omitempty"`
}

// Actor is the `act` claim of a token an agent obtained for its human.
type Actor struct {
	// Subject is the agent's deviceId.
	Subject string `json:"sub"`
	// Profile is ActorProfileAgent.
	Profile string `json:"sub_profile,omitempty"`
}

// AppendClaims appends the claims' JSON (keys.ClaimsAppender): what json.Marshal
// writes, by hand when keys.ClaimsJSON can.
func (c Claims) AppendClaims(b []byte) ([]byte, error) {
	o := keys.NewClaimsJSON(b)
	o.Registered(&c.RegisteredClaims)
	o.String("client_id", c.ClientID, false)
	o.String("scope", c.Scope, false)
	o.Int("auth_time", c.AuthTime, true)
	o.String("sid", c.GrantID, false)
	if c.Act != nil {
		o.Object("act", func(o *keys.ClaimsJSON) {
			o.String("sub", c.Act.Subject, false)
			o.String("sub_profile", c.Act.Profile, true)
		})
	}
	return o.End(func() any { return c })
}

// ActorProfileAgent is the sub_profile of an agent acting for a person.
const ActorProfileAgent = "ai_agent"

// AgentID is the deviceId of the agent acting for the subject, "" for a token of
// the subject itself.
func (c *Claims) AgentID() string {
	if c.Act == nil {
		return ""
	}
	return c.Act.Subject
}

// HasScopes reports whether every scope in want was granted.
func (c *Claims) HasScopes(want ...string) bool {
	for _, s := range want {
		if !hasField(c.Scope, s) {
			return false
		}
	}
	return true
}

// hasField reports whether s is one of the fields of list as strings.Fields
// splits it, without the slice Fields would allocate on every admitted request.
func hasField(list, s string) bool {
	for f := range strings.FieldsSeq(list) {
		if f == s {
			return true
		}
	}
	return false
}

// Config builds a Verifier.
type Config struct {
	// Issuer is the required `iss`.
	Issuer string
	// Algorithm is the only accepted signature algorithm (ES256 for palmgate).
	Algorithm string
	// Keys finds the verification keys. With a *RemoteKeys, high-s ES256
	// signatures are accepted (the remote issuer may not normalise s); with any
	// other source, whose keys are palmgate's own, they are refused.
	Keys KeySource
	// Revocations may be nil (a remote resource server cannot see them).
	Revocations Revocations
	// Leeway is how long past its exp a token is still admitted. Zero for the
	// issuer's own tokens: they are checked on the clock that signed them (or, with
	// several instances, on clocks NTP keeps within milliseconds of it), and exp is
	// rounded down to the second at signing, so a token never outlives its TTL.
	// A remote resource server runs on another machine's clock: palmgate_bearer
	// gives it Leeway by default.
	Leeway time.Duration
	// CacheSize bounds the verified-token cache; 0 means DefaultCacheSize, below 0 none.
	CacheSize int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// DefaultCacheSize is the default number of verified tokens kept.
const DefaultCacheSize = 10000

// Verifier verifies access tokens.
type Verifier struct {
	parser      *jwt.Parser
	algorithm   string
	keys        KeySource
	revocations Revocations
	cache       *cache
	now         func() time.Time
	acceptHighS bool // keys of a remote issuer, which may sign high-s
	leeway      time.Duration
}

// NewVerifier builds a verifier.
func NewVerifier(cfg Config) *Verifier {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	size := cfg.CacheSize
	if size == 0 {
		size = DefaultCacheSize
	}
	_, remote := cfg.Keys.(*RemoteKeys)
	return &Verifier{
		parser:      NewParser(cfg.Issuer, cfg.Algorithm, now),
		algorithm:   cfg.Algorithm,
		keys:        cfg.Keys,
		revocations: cfg.Revocations,
		cache:       newCache(size, max(cfg.Leeway, 0)),
		now:         now,
		acceptHighS: remote,
		leeway:      max(cfg.Leeway, 0),
	}
}

// ErrWrongAudience is returned (wrapping ErrInvalidToken) for a valid token whose
// aud does not hold the audience a resource server requires.
var ErrWrongAudience = fmt.Errorf("%w: the access token was issued for another audience", ErrInvalidToken)

// VerifyFor is Verify, then, when audience is not "", the token's aud must hold it
// (ErrWrongAudience otherwise).
func (v *Verifier) VerifyFor(ctx context.Context, token, audience string) (*Claims, error) {
	claims, err := v.Verify(ctx, token)
	if err != nil || audience == "" || claims.HasAudience(audience) {
		return claims, err
	}
	return nil, ErrWrongAudience
}

// Verify checks every rule of an access token: the signature by the issuer's key
// with the algorithm pinned, `typ` at+jwt, iss, exp (and iat, nbf), sub, sid, and
// that sid's grant was not revoked (when the verifier sees revocations). It returns
// the claims, or an error wrapping ErrInvalidToken, or ErrIssuerUnavailable when the
// key is not cached and the issuer cannot be reached, or when the revocations
// cannot be checked (then also wrapping the store's error).
func (v *Verifier) Verify(ctx context.Context, token string) (*Claims, error) {
	now := v.now()
	key := v.cacheKey(token)
	claims, ok := v.cache.get(key, now)
	if !ok {
		var err error
		if claims, err = v.verify(ctx, token); err != nil {
			return nil, err
		}
		v.cache.put(key, claims, now)
	}
	// A cached token is checked too: the cache only saves the signature check, and a
	// revocation made after the token was cached, on any instance, refuses it.
	if v.revocations != nil {
		revoked, err := v.revocations.Revoked(ctx, claims.GrantID)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrIssuerUnavailable, err)
		}
		if revoked {
			return nil, ErrRevoked
		}
	}
	return claims, nil
}

// CacheTokens names the verified-token cache in CacheStats.
const CacheTokens = "bearer_tokens"

// CacheStats returns the hits and misses of the verified-token cache since the
// Verifier was built (none when it has no cache).
func (v *Verifier) CacheStats() cachestat.Stats {
	return v.cache.stats.Stats(CacheTokens)
}

// Remember caches the claims of a token its issuer has just signed, so that its
// first use costs no signature check. Revocation is still checked on every use.
func (v *Verifier) Remember(token string, claims *Claims) {
	v.cache.put(token, claims, v.now())
}

// cacheKey is the string under which the claims of token are cached: the token
// itself, or, for a verifier that accepts high-s signatures, its low-s form, so
// that a token and its malleated twin share one entry. Only a token whose signature
// segment is canonical base64url is rewritten: the parser refuses the others.
func (v *Verifier) cacheKey(token string) string {
	if !v.acceptHighS {
		return token
	}
	i := strings.LastIndexByte(token, '.')
	if i < 0 {
		return token
	}
	sig, err := base64.RawURLEncoding.Strict().DecodeString(token[i+1:])
	if err != nil || len(sig) != keys.ES256SignatureSize || keys.LowS(sig) {
		return token
	}
	return token[:i+1] + base64.RawURLEncoding.EncodeToString(keys.NormalizeS(sig))
}

// NewParser returns the parser of palmgate's tokens, built once per use: alg pinned,
// strict base64url (a signature segment with stray bits is another string of the
// token), issuer, exp required, iat checked, the leeway and the clock. Its leeway
// (Leeway) is that of iat and nbf; a verifier whose leeway on exp is smaller checks
// exp again itself (Verifier.verify).
func NewParser(issuer, alg string, now func() time.Time) *jwt.Parser {
	return jwt.NewParser(
		jwt.WithValidMethods([]string{alg}),
		jwt.WithStrictDecoding(),
		jwt.WithIssuer(issuer),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(Leeway),
		jwt.WithTimeFunc(now),
	)
}

// KeyFunc finds the verification key of a token of type typ: it checks the `typ`
// header (so that one kind of token never stands in for another), finds the key by
// `kid` in src, requires it to be for alg (or, with alg "", for the token's own
// alg, which the parser has pinned to its methods) and, unless acceptHighS, an ES256
// signature in its low-s form (the only one palmgate signs). The key source's
// error is returned as is, and also stored in *keyErr when keyErr is not nil, so
// that a caller tells an unavailable issuer from an invalid token.
func KeyFunc(ctx context.Context, src KeySource, typ, alg string, acceptHighS bool, keyErr *error) jwt.Keyfunc {
	return func(t *jwt.Token) (any, error) {
		if got, _ := t.Header["typ"].(string); !strings.EqualFold(got, typ) && !strings.EqualFold(got, "application/"+typ) {
			return nil, fmt.Errorf("token type %q is not %s", got, typ)
		}
		kid, _ := t.Header["kid"].(string)
		key, keyAlg, err := src.Key(ctx, kid)
		if err != nil {
			if keyErr != nil {
				*keyErr = err
			}
			return nil, err
		}
		want := alg
		if want == "" {
			want = t.Method.Alg() // one of the parser's pinned methods
		}
		if keyAlg != want {
			return nil, fmt.Errorf("key %s is for %s, not %s", kid, keyAlg, want)
		}
		if keyAlg == keys.ES256 && !acceptHighS && !keys.LowS(t.Signature) {
			return nil, errors.New("the ES256 signature is not in its low-s form")
		}
		if _, own := key.(*keys.OwnES256Key); own {
			// A key of palmgate's own set verifies with its private half, about 4.6
			// times cheaper (keys/ownverify.go). golang-jwt verifies with t.Method
			// once this function returns; its own ES256 method refuses this key
			// type, so a golang-jwt that read the method earlier would refuse every
			// such token rather than skip the check.
			t.Method = keys.OwnES256
		}
		return key, nil
	}
}

// verify checks the token itself (not its revocation). Every palmgate access token
// carries sub, exp and sid (its grant): one without sid could not be revoked, and
// is refused.
func (v *Verifier) verify(ctx context.Context, token string) (*Claims, error) {
	var claims Claims
	var keyErr error
	_, err := v.parser.ParseWithClaims(token, &claims, KeyFunc(ctx, v.keys, TokenType, v.algorithm, v.acceptHighS, &keyErr))
	if err != nil {
		if errors.Is(keyErr, ErrIssuerUnavailable) {
			return nil, keyErr
		}
		if errors.Is(keyErr, storage.ErrUnavailable) { // the issuer's own key set, its store down
			return nil, fmt.Errorf("%w: %w", ErrIssuerUnavailable, keyErr)
		}
		if errors.Is(err, jwt.ErrTokenExpired) {
			return nil, fmt.Errorf("%w: %v", ErrExpired, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	if claims.Subject == "" || claims.ExpiresAt == nil || claims.GrantID == "" {
		return nil, fmt.Errorf("%w: sub, exp and sid are required", ErrInvalidToken)
	}
	if !live(&claims, v.now(), v.leeway) {
		return nil, fmt.Errorf("%w at %s", ErrExpired, claims.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return &claims, nil
}

// live reports whether a token with claims is admitted at now: before its exp plus
// leeway (exp is the first second at which it is no longer valid, RFC 7519 4.1.4).
func live(claims *Claims, now time.Time, leeway time.Duration) bool {
	return now.Before(claims.ExpiresAt.Time.Add(leeway))
}

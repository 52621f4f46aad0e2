package bearer

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/internal/clocktest"
	"github.com/palmgate/palmgate/internal/keystest"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/badgerstore"
)

// The fuzz target of access tokens, the outside input of every request a resource
// server (palmgate_bearer, /oauth2/userinfo, the sidecar) checks. Seeds:
// testdata/fuzz/FuzzVerify/ and the f.Add calls below.
//
// While fuzzing, the coordinator and every worker process run FuzzVerify's setup on
// their own store, so a key generated at random would differ between them and the
// valid seeds would be garbage to the workers. The active ES256 key is therefore a
// fixed one, stored in the layout core/keys documents (keys/{alg}/{kid}), and the
// clock is fixed: the valid seeds verify in every process and stay valid in
// testdata.

const (
	fuzzIssuer       = "https://id.example.test/oauth2"
	fuzzRevokedGrant = "revoked-grant"
	fuzzKID          = "fuzz-es256"
)

// fuzzNow is the fixed clock of FuzzVerify.
var fuzzNow = time.Unix(1_800_000_000, 0).UTC()

// storeFixedES256Key stores the fixed active ES256 key of the fuzz target before
// keys.Open loads the set (which then generates only the RS256 key).
func storeFixedES256Key(tb testing.TB, store storage.Store) {
	tb.Helper()
	scalar := sha256.Sum256([]byte("palmgate fuzz bearer es256"))
	priv, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), scalar[:])
	if err != nil {
		tb.Fatalf("P-256 key: %v", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		tb.Fatalf("PKCS#8: %v", err)
	}
	rec, err := json.Marshal(map[string]any{"kid": fuzzKID, "alg": keys.ES256, "pkcs8": der, "created": fuzzNow, "active": true})
	if err != nil {
		tb.Fatal(err)
	}
	err = store.Update(context.Background(), func(txn storage.Txn) error {
		if err := txn.Set([]byte("keylock/"+keys.ES256), []byte(fuzzKID), 0); err != nil {
			return err
		}
		return txn.Set([]byte("keys/"+keys.ES256+"/"+fuzzKID), rec, 0)
	})
	if err != nil {
		tb.Fatalf("storing the fixed key: %v", err)
	}
}

// fuzzRevocations revokes one grant.
type fuzzRevocations struct{}

func (fuzzRevocations) Revoked(_ context.Context, grantID string) (bool, error) {
	return grantID == fuzzRevokedGrant, nil
}

// FuzzVerify: Verifier.Verify never panics; every refusal wraps ErrInvalidToken;
// and an accepted token is ES256-signed by a key of the set (checked here with
// crypto/ecdsa directly) in its low-s form and canonical base64url, typed at+jwt,
// from the issuer, unexpired, with a subject and not from a revoked grant.
func FuzzVerify(f *testing.F) {
	ctx := context.Background()
	store, err := badgerstore.Open(f.TempDir(), zap.NewNop())
	if err != nil {
		f.Fatalf("badgerstore.Open: %v", err)
	}
	f.Cleanup(func() { _ = store.Close() })
	storeFixedES256Key(f, store)
	clock := clocktest.New(fuzzNow).Now
	set, err := keys.Open(ctx, store, clock, keys.WithGenerator(keystest.Generator))
	if err != nil {
		f.Fatalf("keys.Open: %v", err)
	}
	if k := set.Active(keys.ES256); k == nil || k.ID != fuzzKID {
		f.Fatalf("the fixed ES256 key is not the active one: core/keys changed its storage layout?")
	}
	v := NewVerifier(Config{Issuer: fuzzIssuer, Algorithm: keys.ES256, Keys: set, Revocations: fuzzRevocations{}, Now: clock})

	now := fuzzNow
	claims := func(grant string, exp time.Time) Claims {
		return Claims{
			RegisteredClaims: jwt.RegisteredClaims{
				Issuer: fuzzIssuer, Subject: "pairwise-sub", Audience: jwt.ClaimStrings{"https://id.example.test"},
				IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(exp), ID: "jti-1",
			},
			ClientID: "app", Scope: "openid profile", GrantID: grant,
		}
	}
	sign := func(alg, typ string, c Claims) string {
		token, err := set.Sign(alg, typ, c)
		if err != nil {
			f.Fatalf("signing seed: %v", err)
		}
		return token
	}
	valid := sign(keys.ES256, TokenType, claims("grant-1", now.Add(time.Hour)))
	if _, err := v.Verify(ctx, valid); err != nil {
		f.Fatalf("seed token refused: %v", err)
	}
	f.Add(valid)
	f.Add(sign(keys.ES256, TokenType, claims(fuzzRevokedGrant, now.Add(time.Hour))))
	f.Add(sign(keys.ES256, "JWT", claims("grant-1", now.Add(time.Hour))))
	f.Add(sign(keys.ES256, TokenType, claims("grant-1", now.Add(-time.Hour))))
	f.Add(sign(keys.RS256, TokenType, claims("grant-1", now.Add(time.Hour))))

	f.Fuzz(func(t *testing.T, token string) {
		got, err := v.Verify(ctx, token)
		if err != nil {
			if got != nil {
				t.Fatalf("Verify returned claims and an error: %v", err)
			}
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("error %v does not wrap ErrInvalidToken", err)
			}
			return
		}
		parts := strings.Split(token, ".")
		if len(parts) != 3 {
			t.Fatalf("accepted a token of %d parts", len(parts))
		}
		var header struct {
			Alg string `json:"alg"`
			Typ string `json:"typ"`
			Kid string `json:"kid"`
		}
		hb, err := base64.RawURLEncoding.DecodeString(parts[0])
		if err != nil || json.Unmarshal(hb, &header) != nil {
			t.Fatalf("accepted a token whose header does not decode: %q", parts[0])
		}
		if header.Alg != keys.ES256 {
			t.Fatalf("accepted alg %q", header.Alg)
		}
		if !strings.EqualFold(header.Typ, TokenType) && !strings.EqualFold(header.Typ, "application/"+TokenType) {
			t.Fatalf("accepted typ %q", header.Typ)
		}
		k := set.ByID(header.Kid)
		if k == nil || k.Algorithm != keys.ES256 {
			t.Fatalf("accepted kid %q, not an ES256 key of the set", header.Kid)
		}
		pub, ok := k.Public().(*ecdsa.PublicKey)
		sig, err := base64.RawURLEncoding.DecodeString(parts[2])
		digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
		if !ok || err != nil || len(sig) != 64 ||
			!ecdsa.Verify(pub, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
			t.Fatalf("accepted a token without a valid ES256 signature by key %s", header.Kid)
		}
		if new(big.Int).SetBytes(sig[32:]).Cmp(new(big.Int).Rsh(elliptic.P256().Params().N, 1)) > 0 {
			t.Fatalf("accepted a high-s signature: the malleated twin of a token")
		}
		if base64.RawURLEncoding.EncodeToString(sig) != parts[2] {
			t.Fatalf("accepted a signature segment with stray bits: %q", parts[2])
		}
		if got.Issuer != fuzzIssuer || got.Subject == "" || got.ExpiresAt == nil {
			t.Fatalf("accepted iss %q, sub %q, exp %v", got.Issuer, got.Subject, got.ExpiresAt)
		}
		if !fuzzNow.Before(got.ExpiresAt.Time) { // the issuer's own tokens: exp is exact
			t.Fatalf("accepted a token that expired at %v", got.ExpiresAt)
		}
		if got.GrantID == fuzzRevokedGrant {
			t.Fatalf("accepted a token of a revoked grant")
		}
	})
}

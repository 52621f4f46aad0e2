package palm

import (
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// MaxAssertionLifetime bounds exp - iat of an assertion.
const MaxAssertionLifetime = 5 * time.Minute

// maxAssertionLen bounds the compact JWS accepted from a client.
const maxAssertionLen = 8 << 10

// clockLeeway tolerates small clock differences between palmgate and an attestor.
const clockLeeway = 30 * time.Second

// Attestor is a trusted palm-matching engine: its name is the `iss` of its assertions
// and its key (Ed25519 or ECDSA P-256) pins the algorithm (EdDSA or ES256).
type Attestor struct {
	Name string
	Key  crypto.PublicKey
}

// giveAttestorKey is what to give as an attestor's key.
const giveAttestorKey = "give the engine's public key as base64 DER SubjectPublicKeyInfo (as `caddy palmgate keygen` prints it) or its PEM"

var errEmptyAttestorKey = errors.New("palm attestor key is empty (a {file.…} placeholder naming a missing or unreadable file, or an unset {env.…}?); " + giveAttestorKey)

// ParseAttestorKey parses a base64 DER SubjectPublicKeyInfo holding an Ed25519 or
// P-256 public key, or the PEM "PUBLIC KEY" that holds one (a key file read by a
// {file.…} placeholder). Its errors say what to give instead: they are what an
// operator reads when Caddy refuses the config.
func ParseAttestorKey(b64 string) (crypto.PublicKey, error) {
	in := strings.TrimSpace(b64)
	if in == "" {
		return nil, errEmptyAttestorKey
	}
	var der []byte
	if strings.HasPrefix(in, "-----BEGIN ") {
		block, _ := pem.Decode([]byte(in))
		switch {
		case block == nil:
			return nil, fmt.Errorf("palm attestor key is not valid PEM; %s", giveAttestorKey)
		case strings.Contains(block.Type, "PRIVATE KEY"):
			return nil, fmt.Errorf("palm attestor key is a private key (PEM %s): give its public half, never the private key (`openssl pkey -pubout`)", block.Type)
		case block.Type != "PUBLIC KEY":
			return nil, fmt.Errorf("palm attestor key is a PEM %s, not a PUBLIC KEY; %s", block.Type, giveAttestorKey)
		}
		der = block.Bytes
	} else {
		var err error
		if der, err = base64.StdEncoding.DecodeString(in); err != nil {
			return nil, fmt.Errorf("palm attestor key is not base64 (%v); %s", err, giveAttestorKey)
		}
	}
	key, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		if _, perr := x509.ParsePKCS8PrivateKey(der); perr == nil {
			return nil, errors.New("palm attestor key is a private key (PKCS #8): give its public half, never the private key (`openssl pkey -pubout`)")
		}
		return nil, fmt.Errorf("palm attestor key is not a DER SubjectPublicKeyInfo; %s", giveAttestorKey)
	}
	if _, err := algorithmFor(key); err != nil {
		return nil, err
	}
	return key, nil
}

// algorithmFor names the only JWS algorithm accepted for key.
func algorithmFor(key crypto.PublicKey) (string, error) {
	switch k := key.(type) {
	case ed25519.PublicKey:
		return jwt.SigningMethodEdDSA.Alg(), nil
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() {
			return jwt.SigningMethodES256.Alg(), nil
		}
	}
	return "", fmt.Errorf("palm attestor key must be Ed25519 or ECDSA P-256, not %s", keyKind(key))
}

// keyKind names a public key's type in words (not Go's).
func keyKind(key crypto.PublicKey) string {
	switch k := key.(type) {
	case *rsa.PublicKey:
		return "an RSA key"
	case *ecdsa.PublicKey:
		return "an ECDSA " + k.Curve.Params().Name + " key"
	case *ecdh.PublicKey:
		return "an X25519 key"
	}
	return "this kind of key"
}

// Claims are the claims of a palm assertion.
type Claims struct {
	jwt.RegisteredClaims
	Challenge string `json:"challenge"`
	Nonce     string `json:"nonce"`
}

// Verifier checks palm assertions against the configured attestors.
type Verifier struct {
	byName map[string]attestorParser
}

type attestorParser struct {
	key    crypto.PublicKey
	parser *jwt.Parser
}

// NewVerifier builds a verifier whose assertions must have audience `audience`.
func NewVerifier(audience string, attestors []Attestor, now func() time.Time) (*Verifier, error) {
	v := &Verifier{byName: make(map[string]attestorParser, len(attestors))}
	for _, a := range attestors {
		if a.Name == "" {
			return nil, errors.New("palm attestor without a name")
		}
		if _, dup := v.byName[a.Name]; dup {
			return nil, fmt.Errorf("palm attestor %q is configured twice", a.Name)
		}
		alg, err := algorithmFor(a.Key)
		if err != nil {
			return nil, fmt.Errorf("palm attestor %q: %w", a.Name, err)
		}
		v.byName[a.Name] = attestorParser{key: a.Key, parser: jwt.NewParser(
			jwt.WithValidMethods([]string{alg}),
			jwt.WithIssuer(a.Name),
			jwt.WithAudience(audience),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(clockLeeway),
			jwt.WithTimeFunc(now),
		)}
	}
	return v, nil
}

// Verify checks a compact JWS assertion: a known attestor, its pinned algorithm and
// signature, audience, iat and exp (at most MaxAssertionLifetime apart), and the
// presence of the challenge and nonce claims. Matching them to a challenge is the
// caller's job. It returns ErrMalformed or ErrBadAssertion (wrapped) on failure.
func (v *Verifier) Verify(assertion string) (*Claims, error) {
	if assertion == "" || len(assertion) > maxAssertionLen {
		return nil, fmt.Errorf("%w: assertion is empty or longer than %d bytes", ErrMalformed, maxAssertionLen)
	}
	var unverified Claims
	if _, _, err := jwt.NewParser().ParseUnverified(assertion, &unverified); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	a, ok := v.byName[unverified.Issuer]
	if !ok {
		return nil, fmt.Errorf("%w: unknown attestor", ErrBadAssertion)
	}
	var claims Claims
	_, err := a.parser.ParseWithClaims(assertion, &claims, func(*jwt.Token) (any, error) { return a.key, nil })
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadAssertion, err)
	}
	if claims.IssuedAt == nil || claims.ExpiresAt.Sub(claims.IssuedAt.Time) > MaxAssertionLifetime {
		return nil, fmt.Errorf("%w: assertion lives longer than %s", ErrBadAssertion, MaxAssertionLifetime)
	}
	if claims.Subject == "" || claims.Challenge == "" || claims.Nonce == "" {
		return nil, fmt.Errorf("%w: sub, challenge and nonce are required", ErrBadAssertion)
	}
	return &claims, nil
}

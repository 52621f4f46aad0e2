package palm

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// EngineAssertionLifetime is how long an assertion an Engine signs is valid.
const EngineAssertionLifetime = time.Minute

// Engine signs palm assertions as a palm-matching engine does once it has
// recognised a person: the integrator's stand-in for the mobile app (`caddy
// palmgate scan`) and dev mode's simulated scans. Its key is Ed25519 (EdDSA) or
// ECDSA P-256 (ES256), the algorithm the verifier pins for the attestor.
type Engine struct {
	// Name is the attestor's name, as configured in palm_attestor: the `iss`.
	Name string
	// Audience is the issuer (palmgate's public base URL): the `aud`.
	Audience string
	// Key is the attestor's private key.
	Key crypto.Signer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Sign returns the compact JWS asserting that the person palmSubject answered
// challenge challengeID with nonce: iss, aud, sub, challenge, nonce, iat, and exp
// EngineAssertionLifetime after iat.
func (e Engine) Sign(challengeID, nonce, palmSubject string) (string, error) {
	method, err := signingMethod(e.Key)
	if err != nil {
		return "", err
	}
	now := time.Now()
	if e.Now != nil {
		now = e.Now()
	}
	claims := Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    e.Name,
			Subject:   palmSubject,
			Audience:  jwt.ClaimStrings{e.Audience},
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(EngineAssertionLifetime)),
		},
		Challenge: challengeID,
		Nonce:     nonce,
	}
	s, err := jwt.NewWithClaims(method, claims).SignedString(e.Key)
	if err != nil {
		return "", fmt.Errorf("signing the palm assertion: %w", err)
	}
	return s, nil
}

// signingMethod is the JWS algorithm of an attestor's private key.
func signingMethod(key crypto.Signer) (jwt.SigningMethod, error) {
	if key == nil {
		return nil, errors.New("palm engine has no key")
	}
	alg, err := algorithmFor(key.Public())
	if err != nil {
		return nil, err
	}
	return jwt.GetSigningMethod(alg), nil
}

// NewEngineKey generates an attestor key pair, Ed25519 or (p256) ECDSA P-256, and
// returns the private key as PKCS#8 PEM and the public key as palm_attestor takes
// it: base64 (standard, padded) DER SubjectPublicKeyInfo.
func NewEngineKey(p256 bool) (privatePEM []byte, publicKey string, err error) {
	var priv crypto.Signer
	if p256 {
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	} else {
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	}
	if err != nil {
		return nil, "", fmt.Errorf("generating the key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, "", fmt.Errorf("encoding the private key: %w", err)
	}
	spki, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		return nil, "", fmt.Errorf("encoding the public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), base64.StdEncoding.EncodeToString(spki), nil
}

// ParseEngineKey reads an attestor's private key from PEM: PKCS#8 ("PRIVATE
// KEY", as NewEngineKey writes it) or SEC 1 ("EC PRIVATE KEY", as `openssl
// ecparam -genkey` writes it), Ed25519 or P-256. The errors say what the file
// holds instead.
func ParseEngineKey(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block found (want a PKCS#8 \"PRIVATE KEY\", as `caddy palmgate keygen` writes)")
	}
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("the PEM block is a %q, not a private key (want \"PRIVATE KEY\", PKCS#8)", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("the private key cannot be read: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("a %T cannot sign", key)
	}
	if _, err := signingMethod(signer); err != nil {
		return nil, err
	}
	return signer, nil
}

package palm

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"time"
)

// DevAttestorName is the `iss` of simulated palm scans in dev mode.
const DevAttestorName = "palmgate-dev"

// maxPalmSubjectLen bounds a simulated palm subject.
const maxPalmSubjectLen = 128

// DevAttestor simulates a palm engine for local development: it signs assertions for
// whatever palm subject it is told, so it must never run in production.
type DevAttestor struct {
	audience string
	now      func() time.Time
	key      ed25519.PrivateKey
}

// NewDevAttestor creates a dev attestor with a fresh key.
func NewDevAttestor(audience string, now func() time.Time) (*DevAttestor, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating dev attestor key: %w", err)
	}
	return &DevAttestor{audience: audience, now: now, key: key}, nil
}

// Attestor is the trusted-attestor entry of the dev attestor.
func (d *DevAttestor) Attestor() Attestor {
	return Attestor{Name: DevAttestorName, Key: d.key.Public()}
}

// Sign makes the assertion a palm engine would send after recognising palmSubject.
func (d *DevAttestor) Sign(challengeID, nonce, palmSubject string) (string, error) {
	if palmSubject == "" || len(palmSubject) > maxPalmSubjectLen {
		return "", fmt.Errorf("%w: palmSubject must be 1 to %d bytes", ErrMalformed, maxPalmSubjectLen)
	}
	s, err := Engine{Name: DevAttestorName, Audience: d.audience, Key: d.key, Now: d.now}.Sign(challengeID, nonce, palmSubject)
	if err != nil {
		return "", errors.Join(errors.New("signing dev assertion"), err)
	}
	return s, nil
}

package palm

import (
	"errors"
	"fmt"
	"strings"
)

// AttestorConfig is a trusted palm engine as configured: its name (the `iss` of
// its assertions) and its public key, base64 DER SubjectPublicKeyInfo (Ed25519 or
// P-256).
type AttestorConfig struct {
	Name      string
	PublicKey string
}

// CheckAttestors checks the configured attestors without parsing their keys (the
// one definition of the rules; NewService applies them, and a config's validation
// may call it early): each has a name and a key, no name twice nor the dev
// attestor's in dev mode, and at least one attestor or dev mode, as a login that
// can never complete is a misconfiguration. The messages name the Caddyfile option.
func CheckAttestors(list []AttestorConfig, dev bool) error {
	if !dev && len(list) == 0 {
		return errors.New("palmgate: neither dev nor any palm_attestor is configured, so no palm scan could ever complete; add `palm_attestor <name> <public key>` (or `dev` for local development)")
	}
	seen := map[string]bool{}
	for _, pa := range list {
		if pa.Name == "" {
			return errors.New("palm_attestor: a name and a public key are required")
		}
		if strings.TrimSpace(pa.PublicKey) == "" {
			return fmt.Errorf("palm_attestor %s: %w", pa.Name, errEmptyAttestorKey)
		}
		if seen[pa.Name] || (dev && pa.Name == DevAttestorName) {
			return fmt.Errorf("palm_attestor %s: name used twice", pa.Name)
		}
		seen[pa.Name] = true
	}
	return nil
}

// parseAttestors checks the configured attestors and parses their keys.
func parseAttestors(list []AttestorConfig, dev bool) ([]Attestor, error) {
	if err := CheckAttestors(list, dev); err != nil {
		return nil, err
	}
	attestors := make([]Attestor, 0, len(list))
	for _, pa := range list {
		key, err := ParseAttestorKey(pa.PublicKey)
		if err != nil {
			return nil, fmt.Errorf("palm_attestor %s: %w", pa.Name, err)
		}
		attestors = append(attestors, Attestor{Name: pa.Name, Key: key})
	}
	return attestors, nil
}

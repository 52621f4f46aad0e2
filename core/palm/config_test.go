package palm

import (
	"strings"
	"testing"

	"github.com/palmgate/palmgate/storage/memstore"
)

// TestNewServiceChecksAttestors: NewService applies CheckAttestors and parses the
// configured keys, the one place of the attestor rules.
func TestNewServiceChecksAttestors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"none and no dev", Config{}, "neither dev nor any palm_attestor"},
		{"no key", Config{AttestorKeys: []AttestorConfig{{Name: "engine"}}}, "palm_attestor engine: palm attestor key is empty"},
		{"twice", Config{AttestorKeys: []AttestorConfig{{"engine", "k"}, {"engine", "k"}}}, "name used twice"},
		{"dev name in dev", Config{Dev: true, AttestorKeys: []AttestorConfig{{DevAttestorName, "k"}}}, "name used twice"},
		{"bad key", Config{AttestorKeys: []AttestorConfig{{"engine", "not base64!"}}}, "palm_attestor engine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Store, tc.cfg.Issuer = memstore.New(), testIssuer
			if _, err := NewService(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewService = %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

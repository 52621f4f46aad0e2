package caddymodule

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/core/palm"
)

// TestAttestorKeyPlaceholders: palm_attestor's key takes {file.…} and {env.…}
// as the secrets do, so that an engine's key file (PEM, as openssl writes it)
// can be named; a file that is missing says so rather than "not base64 at byte
// 0" (fourth review).
func TestAttestorKeyPlaceholders(t *testing.T) {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(pub)
	file := filepath.Join(t.TempDir(), "engine.pub")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PALMGATE_TEST_ENGINE_KEY", string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})))
	for _, tc := range []struct{ key, want string }{
		{"{file." + file + "}", ""},
		{"{env.PALMGATE_TEST_ENGINE_KEY}", ""},
		{"{file." + file + ".missing}", "palm_attestor engine: palm attestor key is empty"},
		{"{env.PALMGATE_TEST_UNSET_KEY}", "palm_attestor engine: palm attestor key is empty"},
	} {
		app := App{Issuer: "https://id.example.com", PalmAttestors: []PalmAttestor{{Name: "engine", PublicKey: tc.key}}}
		app.setDefaults()
		err := app.Validate()
		if err == nil {
			_, err = palm.ParseAttestorKey(app.PalmAttestors[0].PublicKey)
		}
		if tc.want == "" && err != nil {
			t.Errorf("palm_attestor engine %s: %v, want the key read", tc.key, err)
		}
		if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("palm_attestor engine %s: %v, want %q", tc.key, err, tc.want)
		}
	}
}

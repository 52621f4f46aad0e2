package palm

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"strings"
	"testing"
)

// TestParseAttestorKeyOperatorMistakes: the keys an operator pastes by mistake
// are refused in words that say what to give (an empty value, a private key, an
// RSA key: never a Go type such as *rsa.PublicKey), and the PEM a key file
// holds (`openssl pkey -pubout`, a {file.…} placeholder) is taken as the base64
// DER inside it (fourth review).
func TestParseAttestorKeyOperatorMistakes(t *testing.T) {
	edPub, edPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, _ := x509.MarshalPKIXPublicKey(edPub)
	privDER, _ := x509.MarshalPKCS8PrivateKey(edPriv)
	pubPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}))
	privPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}))

	for _, in := range []string{pubPEM, " " + base64.StdEncoding.EncodeToString(pubDER) + "\n"} {
		key, err := ParseAttestorKey(in)
		if err != nil {
			t.Errorf("ParseAttestorKey(%q): %v, want the Ed25519 key", in, err)
		} else if !edPub.Equal(key) {
			t.Errorf("ParseAttestorKey(%q) = another key", in)
		}
	}
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", "is empty"},
		{"blank", " \n", "is empty"},
		{"private key PEM", privPEM, "is a private key"},
		{"private key DER", base64.StdEncoding.EncodeToString(privDER), "is a private key"},
		{"RSA", spki(t, &rsaKey.PublicKey), "not an RSA key"},
	} {
		_, err := ParseAttestorKey(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "*") {
			t.Errorf("%s: %v, want an error saying %q (and no Go type)", tc.name, err, tc.want)
		}
	}
}

package keys

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/storage"
)

// TestOpenNamesAnES256KeyOfAnotherCurve (2026-11-27): a stored ES256 record whose
// key is not on P-256 (a store edited by hand, or restored from elsewhere) cannot
// be verified by the shortcut and stops the key set from loading; the operator is
// told which key and which curve, not "input overflows the modulus size".
func TestOpenNamesAnES256KeyOfAnotherCurve(t *testing.T) {
	store := openStore(t, t.TempDir())
	openSet(t, store)
	priv, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(record{ID: "odd-curve", Algorithm: ES256, PKCS8: der, Created: testNow})
	if err := store.Update(context.Background(), func(txn storage.Txn) error {
		return txn.Set(keyKey(ES256, "odd-curve"), rec, 0)
	}); err != nil {
		t.Fatal(err)
	}
	_, err = Open(context.Background(), store, fixedClock, testKeys)
	if err == nil || !strings.Contains(err.Error(), "odd-curve") || !strings.Contains(err.Error(), "P-384") {
		t.Fatalf("Open = %v; want an error naming the key and its curve P-384", err)
	}
}

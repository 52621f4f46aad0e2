package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadOrCreateKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent-key.pem")
	created, err := loadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Mode().Perm(); mode != 0o600 {
		t.Errorf("key file mode = %o, want 600", mode)
	}
	loaded, err := loadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if !created.Equal(loaded) {
		t.Error("reloaded key differs from the created one")
	}
}

func TestNewChallenge(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	now := time.UnixMilli(1700000000123)
	c := newChallenge(key, "dev-1", "my-agent", now)

	if want := fmt.Sprintf("my-agent-register-%d", c.Timestamp); c.Message != want {
		t.Errorf("message = %q, want %q", c.Message, want)
	}
	if c.Timestamp != now.UnixMilli() || c.DeviceID != "dev-1" {
		t.Errorf("timestamp/deviceId = %d/%q", c.Timestamp, c.DeviceID)
	}
	der, err := base64.StdEncoding.DecodeString(c.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := base64.StdEncoding.DecodeString(c.Signature)
	if err != nil {
		t.Fatal(err)
	}
	if !ed25519.Verify(pub.(ed25519.PublicKey), []byte(c.Message), sig) {
		t.Error("signature does not verify against the published public key")
	}
}

// fakeServer implements the registry endpoints just enough for one happy run.
func fakeServer(t *testing.T) *httptest.Server {
	polls := 0
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/agent/register/init", func(w http.ResponseWriter, r *http.Request) {
		var req signedRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("init body: %v", err)
		}
		if r.Header.Get("Content-Type") != "application/json" || !strings.Contains(req.Message, "-register-") {
			t.Errorf("unexpected init request: %+v", req)
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"sessionId":"s-1","registrationUrl":"https://palm.example/r/s-1","expiresAt":"2030-01-01T00:00:00Z"}`)
	})
	mux.HandleFunc("GET /v1/agent/register/s-1/status", func(w http.ResponseWriter, r *http.Request) {
		if polls++; polls == 1 {
			fmt.Fprint(w, `{"status":"pending"}`)
			return
		}
		fmt.Fprint(w, `{"status":"completed","deviceId":"dev-1","registration":{"publicKey":"x","registeredAt":"2030-01-01T00:00:01Z"}}`)
	})
	mux.HandleFunc("POST /v1/agent/verify/signature", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"verified":true,"registered":true}`)
	})
	mux.HandleFunc("GET /v1/agent/verify/device/dev-1", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"registered":true,"verified":true,"humanId":"h-1","registeredAt":"2030-01-01T00:00:01Z"}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestRunAgainstFakeServer(t *testing.T) {
	srv := fakeServer(t)
	var out bytes.Buffer
	args := []string{"-server", srv.URL, "-key", filepath.Join(t.TempDir(), "k.pem"),
		"-device", "dev-1", "-interval", "10ms"}
	if err := run(context.Background(), args, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	for _, want := range []string{"https://palm.example/r/s-1", "Status: pending", "Status: completed",
		"verified=true registered=true", `humanId="h-1"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRunConflictAndError(t *testing.T) {
	// 409 for this very agent (the signature check says registered): look the
	// device up and succeed (conflict_test.go: another agent's 409).
	// Any other error status ends the run with the server's error code.
	for status, wantErr := range map[int]bool{http.StatusConflict: false, http.StatusBadRequest: true} {
		mux := http.NewServeMux()
		mux.HandleFunc("POST /v1/agent/register/init", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			fmt.Fprint(w, `{"error":"nope","code":"E_TEST","details":{}}`)
		})
		mux.HandleFunc("POST /v1/agent/verify/signature", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"verified":true,"registered":true}`)
		})
		mux.HandleFunc("GET /v1/agent/verify/device/dev-1", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"registered":true,"verified":true,"humanId":"h-1","registeredAt":"x"}`)
		})
		srv := httptest.NewServer(mux)
		var out bytes.Buffer
		err := run(context.Background(), []string{"-server", srv.URL, "-device", "dev-1",
			"-key", filepath.Join(t.TempDir(), "k.pem")}, &out)
		srv.Close()
		if (err != nil) != wantErr || (wantErr && !strings.Contains(err.Error(), "E_TEST")) {
			t.Errorf("status %d: err = %v, want error: %t", status, err, wantErr)
		}
		if !wantErr && !strings.Contains(out.String(), "Already registered") {
			t.Errorf("status %d: output lacks the notice:\n%s", status, out.String())
		}
	}
}

// TestFingerprint pins the fingerprint to the vector core/agent's TestFingerprint
// pins for the server's, so the agent prints what the registration page shows.
func TestFingerprint(t *testing.T) {
	seed := sha256.Sum256([]byte("fingerprint"))
	if got, want := fingerprint(ed25519.NewKeyFromSeed(seed[:])), "75b8-ec04-6a4e-201f"; got != want {
		t.Errorf("fingerprint = %q, want %q", got, want)
	}
}

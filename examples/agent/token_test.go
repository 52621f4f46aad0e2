package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

func TestTokenCommand(t *testing.T) {
	keyPath := filepath.Join(t.TempDir(), "agent-key.pem")
	key, err := loadOrCreateKey(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/oauth2/token":
			_ = r.ParseForm()
			parts := strings.Split(r.PostForm.Get("assertion"), ".")
			if r.PostForm.Get("grant_type") != jwtBearerGrant || len(parts) != 3 || r.PostForm.Get("client_id") != "shop" {
				http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
				return
			}
			sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
			payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
			var c map[string]any
			_ = json.Unmarshal(payload, &c)
			id := defaultDeviceID(key)
			if !ed25519.Verify(key.Public().(ed25519.PublicKey), []byte(parts[0]+"."+parts[1]), sig) ||
				c["iss"] != id || c["sub"] != id || c["aud"] != srv.URL+"/oauth2/token" || c["jti"] == "" {
				http.Error(w, `{"error":"invalid_grant","error_description":"bad assertion"}`, http.StatusBadRequest)
				return
			}
			_, _ = w.Write([]byte(`{"access_token":"tok-123","token_type":"Bearer","expires_in":3600,"scope":"orders:read"}`))
		case "/api":
			if r.Header.Get("Authorization") != "Bearer tok-123" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			_, _ = w.Write([]byte(`{"ok":true}`))
		}
	}))
	defer srv.Close()
	var out bytes.Buffer
	err = run(context.Background(), []string{"token", "-server", srv.URL, "-key", keyPath, "-client", "shop", "-call", srv.URL + "/api"}, &out)
	if err != nil || !strings.Contains(out.String(), "tok-123") || !strings.Contains(out.String(), `{"ok":true}`) {
		t.Fatalf("token: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"token", "-server", srv.URL, "-key", keyPath, "-client", "other"}, &out); err == nil {
		t.Fatal("a refused token request reported success")
	}
	if err := run(context.Background(), []string{"token", "-key", keyPath}, &out); err == nil || !strings.Contains(err.Error(), "-client") {
		t.Fatalf("token without -client: %v", err)
	}
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// TestConflictOfAnotherAgent: a 409 means that the deviceId or the key is
// registered, not that this agent is: the deviceId may be another agent's
// (another key), or the key registered under another deviceId. The agent checks
// with a signature whether it is the registered one, and only then says
// "Already registered" and exits 0; otherwise it exits 1 naming the conflict,
// rather than printing another agent's lookup as its own.
func TestConflictOfAnotherAgent(t *testing.T) {
	for _, registered := range []bool{true, false} {
		mux := http.NewServeMux()
		mux.HandleFunc("POST /v1/agent/register/init", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"error":"an agent with this deviceId or publicKey is already registered","code":"already_registered"}`)
		})
		mux.HandleFunc("POST /v1/agent/verify/signature", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `{"verified":true,"registered":%t}`, registered)
		})
		mux.HandleFunc("GET /v1/agent/verify/device/dev-1", func(w http.ResponseWriter, r *http.Request) {
			// The deviceId is registered, whoever holds it.
			fmt.Fprint(w, `{"registered":true,"verified":true,"humanId":"h-other","registeredAt":"x"}`)
		})
		srv := httptest.NewServer(mux)
		var out bytes.Buffer
		err := run(context.Background(), []string{"-server", srv.URL, "-device", "dev-1",
			"-key", filepath.Join(t.TempDir(), "k.pem")}, &out)
		srv.Close()
		if registered {
			if err != nil || !strings.Contains(out.String(), "Already registered") {
				t.Errorf("this agent registered: err = %v, output:\n%s", err, out.String())
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "already_registered") {
			t.Errorf("another agent holds the deviceId or the key: err = %v, want an error naming already_registered; output:\n%s", err, out.String())
		}
		if strings.Contains(out.String(), "Already registered") {
			t.Errorf("another agent's registration reported as this agent's:\n%s", out.String())
		}
	}
}

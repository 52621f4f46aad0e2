// Package minimal is the minimal server of issue 19's goal 1: what a plain
// net/http service answering POST /v1/agent/verify/signature must do, and
// nothing of palmgate's. The load script (bench/service) serves Handler in its
// own process and in a process of its own, and bench/minimalcaddy serves the
// same Handler as a Caddy module: the three baselines run the same code.
//
// It imports no palmgate package, so that palmgate's own checks (exact JSON
// keys, strict key validation, the registry read) count against palmgate, and a
// speed-up of core/agent does not speed the baseline up with it.
package minimal

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime"
	"net/http"
)

// VerifyPath is the path of the signature check, as palmgate's.
const VerifyPath = "/v1/agent/verify/signature"

// answer is the JSON of the answer: the same fields, tags and order as
// palmgate's agent.SignatureCheck, so the same encoding work.
type answer struct {
	Verified   bool `json:"verified"`
	Registered bool `json:"registered"`
}

// challenge is the request body; every field is required.
type challenge struct {
	DeviceID  *string `json:"deviceId"`
	PublicKey *string `json:"publicKey"`
	Message   *string `json:"message"`
	Signature *string `json:"signature"`
	Timestamp *int64  `json:"timestamp"`
}

// Handler serves POST VerifyPath with Verify, and GET /static as Caddy's
// `respond "ok" 200` answers it: the two together (the load script's scenarios
// ok-proc and static) measure what Caddy itself costs a request.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /static", Static)
	mux.HandleFunc("POST "+VerifyPath, Verify)
	return mux
}

// Static answers "ok" with the status and headers of Caddy's `respond "ok" 200`.
func Static(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Server", "Caddy")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, "ok")
}

// Verify reads the bounded application/json body, decodes it with
// encoding/json, decodes the base64 key and signature, parses the DER SPKI key
// with crypto/x509, runs the one ed25519.Verify and answers the same JSON with
// the same headers as palmgate. registered is always false: it has no store.
func Verify(w http.ResponseWriter, r *http.Request) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		http.Error(w, "Content-Type must be application/json", http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var c challenge
	if err := json.Unmarshal(body, &c); err != nil || c.DeviceID == nil || c.PublicKey == nil ||
		c.Message == nil || c.Signature == nil || c.Timestamp == nil {
		http.Error(w, "bad challenge", http.StatusBadRequest)
		return
	}
	der, err1 := base64.StdEncoding.DecodeString(*c.PublicKey)
	sig, err2 := base64.StdEncoding.DecodeString(*c.Signature)
	if err1 != nil || err2 != nil || len(sig) != ed25519.SignatureSize {
		http.Error(w, "bad base64", http.StatusBadRequest)
		return
	}
	key, err := x509.ParsePKIXPublicKey(der)
	edKey, ok := key.(ed25519.PublicKey)
	if err != nil || !ok {
		http.Error(w, "not an Ed25519 key", http.StatusBadRequest)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(answer{Verified: ed25519.Verify(edKey, []byte(*c.Message), sig)})
}

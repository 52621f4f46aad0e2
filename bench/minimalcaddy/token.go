package minimalcaddy

import (
	"encoding/json"
	"net/http"

	"github.com/palmgate/palmgate/core/keys"
)

// TokenPath is the path of the token endpoint, as palmgate's.
const TokenPath = "/oauth2/token"

// ES256Client is the client whose ID tokens are signed with ES256 (the load
// script's bench client, as its id_token_signed_response_alg asks); every other
// client's with RS256, palmgate's default.
const ES256Client = "bench"

// Issuer is the issuer in the tokens: as long as the load script's site's.
const Issuer = "http://127.0.0.1:41234/oauth2"

// tokenAnswer is the JSON of the answer: the fields palmgate answers an
// authorization code with.
type tokenAnswer struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	IDToken      string `json:"id_token"`
	Scope        string `json:"scope"`
}

// token answers POST TokenPath as little as a token endpoint can: it parses the
// bounded form, signs the three tokens of an exchange (the signatures of goal
// 3's baseline, bench/exchangesig) and answers them with the headers RFC 6749
// asks for. It checks no client, code or PKCE verifier and stores nothing: what
// it costs beyond the signatures is what HTTP, Caddy and encoding/json cost.
func (h *Handler) token(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "authorization_code" || r.PostForm.Get("code") == "" {
		http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
		return
	}
	client := r.PostForm.Get("client_id")
	alg := keys.RS256
	if client == ES256Client {
		alg = keys.ES256
	}
	t, err := h.signer.Sign3(alg, client)
	if err != nil {
		http.Error(w, `{"error":"server_error"}`, http.StatusInternalServerError)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("Pragma", "no-cache")
	_ = json.NewEncoder(w).Encode(tokenAnswer{AccessToken: t.Access, TokenType: "Bearer", ExpiresIn: 3600,
		RefreshToken: t.Refresh, IDToken: t.ID, Scope: "openid offline_access"})
}

package edge

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/oidc"
)

// handleRegister is RFC 7591 dynamic client registration at /oauth2/register:
// a JSON body of client metadata in, 201 with the client (and its secret, for a
// confidential one) out. oidc.Service.Register owns the rules; the route is rate
// limited per address like every unauthenticated write. Registration off answers
// 404, as a path palmgate does not serve: discovery names no registration_endpoint
// then, and a client falls back to its other ways of getting a client_id.
// Refusals are RFC 7591's: 400 {"error": "invalid_redirect_uri" or
// "invalid_client_metadata", "error_description"}; a body that is not a JSON
// object is invalid_client_metadata too.
func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request) {
	if !s.oidc.RegistrationOpen() {
		s.writeOAuthError(w, r, errNoEndpoint)
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		s.writeOAuthError(w, r, fault.New(fault.UnsupportedMedia, codeUnsupportedMedia, "Content-Type must be application/json"))
		return
	}
	var req oidc.RegistrationRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err := dec.Decode(&req); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			s.writeOAuthError(w, r, fault.New(fault.TooLarge, codeBodyTooLarge, "the body is larger than 64 KiB"))
			return
		}
		writeJSON(w, http.StatusBadRequest, oauthErrorBody{Error: oidc.ErrInvalidClientMetadata, Description: "the body must be a JSON object of client metadata (RFC 7591)"})
		return
	}
	if _, err := dec.Token(); err != io.EOF {
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) { // whitespace past the bound
			s.writeOAuthError(w, r, fault.New(fault.TooLarge, codeBodyTooLarge, "the body is larger than 64 KiB"))
			return
		}
		writeJSON(w, http.StatusBadRequest, oauthErrorBody{Error: oidc.ErrInvalidClientMetadata, Description: "the body must be one JSON object"})
		return
	}
	out, err := s.oidc.Register(r.Context(), req, s.limiter.address(r))
	if err != nil {
		if f, ok := fault.As(err); ok && (f.Code == oidc.ErrInvalidRedirectURI || f.Code == oidc.ErrInvalidClientMetadata) {
			writeJSON(w, http.StatusBadRequest, oauthErrorBody{Error: f.Code, Description: f.Message})
			return
		}
		s.writeOAuthError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

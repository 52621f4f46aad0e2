package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/edge"
)

// The admin routes of clients (see AdminAPI):
//
//	GET    /palmgate/clients                    every client, static ones read-only
//	POST   /palmgate/clients                    create: {"name","redirect_uris",["sector"],
//	                                            ["post_logout_redirect_uris"],["id_token_signed_response_alg"],
//	                                            ["access_token_audience"],["public"],["allowed_origins"]}
//	                                            -> 201 the client with its client_secret (none when public)
//	GET    /palmgate/clients/{id}               one client
//	PATCH  /palmgate/clients/{id}               change any of the fields of create
//	POST   /palmgate/clients/{id}/rotate-secret {"grace":"24h"} (default 24h, "0s" allowed)
//	                                            -> the client with its new client_secret
//	DELETE /palmgate/clients/{id}               remove it and revoke its grants

// clientBody is the JSON body of create and update.
type clientBody struct {
	Name         *string  `json:"name"`
	RedirectURIs []string `json:"redirect_uris"`
	Sector       *string  `json:"sector"`
	// PostLogoutRedirectURIs ([] clears them) and IDTokenAlg ("" is RS256).
	PostLogoutRedirectURIs []string `json:"post_logout_redirect_uris"`
	IDTokenAlg             *string  `json:"id_token_signed_response_alg"`
	// BackchannelLogoutURI ("" removes it): OpenID Connect Back-Channel Logout.
	BackchannelLogoutURI *string `json:"backchannel_logout_uri"`
	// AccessTokenAudience: base_url ("" too), client_id or both.
	AccessTokenAudience *string `json:"access_token_audience"`
	// Public (create only): no secret, PKCE required. AllowedOrigins: CORS origins
	// besides a public client's redirect URIs' ([] clears them).
	Public         *bool    `json:"public"`
	AllowedOrigins []string `json:"allowed_origins"`
}

// empty reports whether b names no field (null is none).
func (b *clientBody) empty() bool {
	return b.Name == nil && b.RedirectURIs == nil && b.Sector == nil && b.PostLogoutRedirectURIs == nil &&
		b.IDTokenAlg == nil && b.BackchannelLogoutURI == nil && b.AccessTokenAudience == nil && b.Public == nil && b.AllowedOrigins == nil
}

func (b *clientBody) spec() oidc.ClientSpec {
	return oidc.ClientSpec{Name: b.Name, RedirectURIs: b.RedirectURIs, Sector: b.Sector,
		PostLogoutRedirectURIs: b.PostLogoutRedirectURIs, IDTokenAlg: b.IDTokenAlg, AccessTokenAudience: b.AccessTokenAudience,
		BackchannelLogoutURI: b.BackchannelLogoutURI, Public: b.Public != nil && *b.Public, AllowedOrigins: b.AllowedOrigins}
}

// clientWithSecret is a client with the secret just issued (shown once).
type clientWithSecret struct {
	*oidc.ClientInfo
	Secret string `json:"client_secret,omitempty"` // a public client has none
}

func adminError(status int, format string, args ...any) error {
	return caddy.APIError{HTTPStatus: status, Err: fmt.Errorf(format, args...)}
}

// decodeAdminJSON reads a bounded JSON object with no unknown field.
func decodeAdminJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, edge.MaxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return adminError(http.StatusBadRequest, "body: %v", err)
	}
	return nil
}

// clientAdminError maps registry errors to statuses: a fault of core's model by its
// class (edge.Status; the store down is Unavailable, 503), anything else 500.
func clientAdminError(err error) error {
	if f, ok := fault.As(err); ok && f.Class != fault.Internal {
		return adminError(edge.Status(f.Class), "%v", err)
	}
	return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: err}
}

func writeAdminJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}

// adminClients serves /palmgate/clients and /palmgate/clients/* for the
// running config's app.
func adminClients(w http.ResponseWriter, r *http.Request) error {
	app, err := activeApp()
	if err != nil {
		return err
	}
	return app.serveAdminClients(w, r)
}

// serveAdminClients serves /palmgate/clients and /palmgate/clients/*.
func (a *App) serveAdminClients(w http.ResponseWriter, r *http.Request) error {
	svc := a.OIDC()
	rest := strings.Trim(strings.TrimPrefix(r.URL.Path, "/palmgate/clients"), "/")
	id, action, _ := strings.Cut(rest, "/")
	ctx := adminContext(r) // the audit log names the admin caller's address
	switch {
	case id == "" && r.Method == http.MethodGet:
		list, err := svc.Clients().List(ctx, "")
		if err != nil {
			return clientAdminError(err)
		}
		if list == nil {
			list = []*oidc.ClientInfo{}
		}
		return writeAdminJSON(w, http.StatusOK, list)
	case id == "" && r.Method == http.MethodPost:
		var b clientBody
		if err := decodeAdminJSON(r, &b); err != nil {
			return err
		}
		ci, secret, err := svc.Clients().Create(ctx, b.spec())
		if err != nil {
			return clientAdminError(err)
		}
		return writeAdminJSON(w, http.StatusCreated, clientWithSecret{ci, secret})
	case id == "":
		w.Header().Set("Allow", "GET, POST")
		return adminError(http.StatusMethodNotAllowed, "method %s not allowed; GET or POST", r.Method)
	case action == "" && r.Method == http.MethodGet:
		ci, err := svc.Clients().Get(ctx, id)
		if err != nil {
			return clientAdminError(err)
		}
		return writeAdminJSON(w, http.StatusOK, ci)
	case action == "" && (r.Method == http.MethodPatch || r.Method == http.MethodPut):
		var b clientBody
		if err := decodeAdminJSON(r, &b); err != nil {
			return err
		}
		if b.Public != nil {
			return adminError(http.StatusBadRequest, "public is chosen when a client is created; create a new client instead")
		}
		if b.empty() {
			return adminError(http.StatusBadRequest, "nothing to change: give at least one of name, redirect_uris, sector, post_logout_redirect_uris, id_token_signed_response_alg, access_token_audience or allowed_origins")
		}
		ci, err := svc.Clients().Update(ctx, id, "", b.spec())
		if err != nil {
			return clientAdminError(err)
		}
		return writeAdminJSON(w, http.StatusOK, ci)
	case action == "" && r.Method == http.MethodDelete:
		if err := svc.Clients().Delete(ctx, id, ""); errors.Is(err, oidc.ErrAfterClientDeletion) {
			a.logger.Warn("palmgate: the deleted client's grants and consents", zap.String("client_id", id), zap.Error(err))
		} else if err != nil {
			return clientAdminError(err)
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	case action == "":
		w.Header().Set("Allow", "GET, PATCH, PUT, DELETE")
		return adminError(http.StatusMethodNotAllowed, "method %s not allowed; GET, PATCH or DELETE", r.Method)
	case action == "rotate-secret" && r.Method == http.MethodPost:
		var b struct {
			Grace *string `json:"grace"`
		}
		if r.ContentLength != 0 {
			if err := decodeAdminJSON(r, &b); err != nil {
				return err
			}
		}
		grace := oidc.DefaultSecretGrace
		if b.Grace != nil {
			d, err := caddy.ParseDuration(*b.Grace)
			if err != nil {
				return adminError(http.StatusBadRequest, "grace: %v", err)
			}
			grace = d
		}
		ci, secret, err := svc.Clients().RotateSecret(ctx, id, "", grace)
		if err != nil {
			return clientAdminError(err)
		}
		return writeAdminJSON(w, http.StatusOK, clientWithSecret{ci, secret})
	case action == "rotate-secret":
		return allowOnly(w, r, http.MethodPost)
	}
	return adminError(http.StatusNotFound, "no such route")
}

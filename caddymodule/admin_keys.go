package caddymodule

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/keys"
)

// The admin routes of the signing keys (see AdminAPI):
//
//	GET  /palmgate/keys          the published keys: {"key_rotation", "keys": [{"kid",
//	                             "alg", "state" (active|retired), "created",
//	                             "rotates_at" (active, with key_rotation),
//	                             "retired_at", "drops_at" (retired)}]}
//	POST /palmgate/keys/rotate   new active keys, for every algorithm or the one of
//	                             {"alg": "ES256"} -> {"active": {alg: kid}}; the old
//	                             ones stay in the JWKS until their tokens expire
//
// Times are RFC 3339 UTC to the second.

// adminKey is a key as the admin API shows it: never its private half.
type adminKey struct {
	KID       string `json:"kid"`
	Alg       string `json:"alg"`
	State     string `json:"state"`
	Created   string `json:"created"`
	RotatesAt string `json:"rotates_at,omitempty"`
	RetiredAt string `json:"retired_at,omitempty"`
	DropsAt   string `json:"drops_at,omitempty"`
}

// adminKeyList is the answer of GET /palmgate/keys.
type adminKeyList struct {
	// KeyRotation is the key_rotation interval, "off" when not set.
	KeyRotation string     `json:"key_rotation"`
	Keys        []adminKey `json:"keys"`
}

// adminTime is t in RFC 3339 UTC to the second, "" for zero.
func adminTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Truncate(time.Second).Format(time.RFC3339)
}

// adminKeys serves GET /palmgate/keys.
func adminKeys(w http.ResponseWriter, r *http.Request) error {
	if err := allowOnly(w, r, http.MethodGet); err != nil {
		return err
	}
	app, err := activeApp()
	if err != nil {
		return err
	}
	return writeAdminJSON(w, http.StatusOK, app.keyList())
}

// keyList is the answer of GET /palmgate/keys.
func (a *App) keyList() adminKeyList {
	every := time.Duration(a.KeyRotation)
	out := adminKeyList{KeyRotation: "off", Keys: []adminKey{}}
	if every > 0 {
		out.KeyRotation = every.String()
	}
	for _, k := range a.Keys().List() {
		ak := adminKey{KID: k.ID, Alg: k.Algorithm, State: "retired", Created: adminTime(k.Created),
			RetiredAt: adminTime(k.Retired), DropsAt: adminTime(k.DropsAt)}
		if k.Active {
			ak.State = "active"
			if every > 0 {
				ak.RotatesAt = adminTime(k.Created.Add(every))
			}
		}
		out.Keys = append(out.Keys, ak)
	}
	return out
}

// rotateKeys serves POST /palmgate/keys/rotate: every algorithm, or the one the
// body names.
func rotateKeys(w http.ResponseWriter, r *http.Request) error {
	if err := allowOnly(w, r, http.MethodPost); err != nil {
		return err
	}
	var body struct {
		Alg string `json:"alg"`
	}
	if r.ContentLength != 0 {
		if err := decodeAdminJSON(r, &body); err != nil {
			return err
		}
	}
	algs := keys.Algorithms
	if body.Alg != "" {
		if !slices.Contains(keys.Algorithms, body.Alg) {
			return adminError(http.StatusBadRequest, "alg: %q is not a signing algorithm (%s)", body.Alg, strings.Join(keys.Algorithms, ", "))
		}
		algs = []string{body.Alg}
	}
	app, err := activeApp()
	if err != nil {
		return err
	}
	return app.rotateKeys(w, r, algs)
}

// rotateKeys rotates the keys of algs, one transaction each, and answers their new
// kids. A rotation whose commit succeeded counts (audited, answered) even when
// what follows fails: its key is the active one in the store, which this
// instance reloads within keys.ReloadInterval if not at once. When the store
// fails midway, the answer is the failure's status and says which algorithms
// were rotated and which were not, since the operator must know what changed.
func (a *App) rotateKeys(w http.ResponseWriter, r *http.Request, algs []string) error {
	set := a.Keys()
	kids := map[string]string{}
	var done []string
	var failed error
	for i, alg := range algs {
		k, err := set.Rotate(r.Context(), alg)
		if k != nil { // committed; err, if any, is the reload after it
			kids[alg] = k.ID
			done = append(done, fmt.Sprintf("%s (kid %s)", alg, k.ID))
			a.logger.Info("signing key rotated by the admin API", zap.String("alg", alg), zap.String("kid", k.ID))
			if err != nil {
				a.logger.Warn("signing key rotated, but reloading the keys after it failed; the key watcher retries",
					zap.String("alg", alg), zap.Error(err))
			}
			continue
		}
		if err == nil {
			continue // nothing to rotate (not a rule of Rotate's; a guard)
		}
		if len(done) == 0 {
			return clientAdminError(err)
		}
		failed = fmt.Errorf("rotated %s, but not %s: %w", strings.Join(done, ", "), strings.Join(algs[i:], ", "), err)
		break
	}
	if len(kids) > 0 {
		a.Events().Emit(adminContext(r), event.Event{Kind: event.KeysRotated, Outcome: event.Manual})
	}
	if failed != nil {
		return clientAdminError(failed)
	}
	return writeAdminJSON(w, http.StatusOK, map[string]any{"active": kids})
}

// Interface guard: the routes are caddy.AdminHandlerFuncs.
var _ caddy.AdminHandlerFunc = adminKeys

package caddymodule

import (
	"context"
	"net"
	"net/http"

	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/event"
)

// The audit log: one structured entry per event of note, on the logger
// "palmgate.audit" (the app's logger, named "palmgate" by Caddy, then "audit"),
// so that an operator routes it to a file of its own with Caddy's `log` global
// option (`include palmgate.audit`). Each entry has a stable msg (auditMessages)
// and the fields client_id, humanId, outcome and remote (the client address Caddy
// determined), and when set purpose, deviceId and key_fingerprint. An event holds
// no secret, token, code, palm subject or public key: nor does an entry.

// AuditLoggerName is the name of the audit log's logger under the app's.
const AuditLoggerName = "audit"

// auditKinds name the kinds that are audited: the msg is the name, followed by
// the outcome for the kinds in withOutcome ("login started"). Signature checks
// and bearer decisions, one per request of an API, are counted, not logged.
var auditKinds = map[event.Kind]string{
	event.Login:               "login",
	event.PalmAssertion:       "palm assertion",
	event.TokenIssued:         "tokens issued",
	event.RefreshReused:       "refresh token reuse detected",
	event.CodeReused:          "authorization code reuse detected",
	event.Registration:        "agent registration",
	event.Logout:              "logout",
	event.ClientCreated:       "client created",
	event.ClientUpdated:       "client updated",
	event.ClientSecretRotated: "client secret rotated",
	event.ClientDeleted:       "client deleted",
	event.AgentRemoved:        "agent removed",
	event.KeysRotated:         "signing keys rotated",
	event.BackupTaken:         "backup taken",
	event.PortalSessionsEnded: "portal sessions ended",
	event.HumanSessionsEnded:  "person signed out",
}

var withOutcome = map[event.Kind]bool{event.Login: true, event.PalmAssertion: true, event.Registration: true}

// auditMessages[kind][outcome] is the msg of an entry, "" for an event not audited;
// made once, so that an entry costs no string building.
var auditMessages = func() (m [event.NumKinds][event.NumOutcomes]string) {
	for k, name := range auditKinds {
		for o := range event.NumOutcomes {
			m[k][o] = name
			if withOutcome[k] && o != event.None {
				m[k][o] = name + " " + o.String()
			}
		}
	}
	return m
}()

// auditLog writes the entry of e, if e is of note.
func auditLog(ctx context.Context, audit *zap.Logger, e event.Event) {
	if audit == nil || e.Kind >= event.NumKinds || e.Outcome >= event.NumOutcomes {
		return
	}
	msg := auditMessages[e.Kind][e.Outcome]
	if msg == "" {
		return
	}
	ce := audit.Check(zap.InfoLevel, msg)
	if ce == nil {
		return
	}
	fields := make([]zap.Field, 0, 7)
	fields = append(fields,
		zap.String("client_id", e.ClientID),
		zap.String("humanId", e.HumanID),
		zap.String("outcome", e.Outcome.String()),
		zap.String("remote", remoteAddr(ctx)),
	)
	if e.Purpose != "" {
		fields = append(fields, zap.String("purpose", e.Purpose))
	}
	if e.DeviceID != "" {
		fields = append(fields, zap.String("deviceId", e.DeviceID))
	}
	if e.KeyFingerprint != "" {
		fields = append(fields, zap.String("key_fingerprint", e.KeyFingerprint))
	}
	ce.Write(fields...)
}

// adminContext is the context of an admin API request, carrying its caller's
// address for the audit log (the admin endpoint is no caddyhttp server: Caddy
// determines no client IP for it).
func adminContext(r *http.Request) context.Context {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return event.WithRemote(r.Context(), host)
}

// Events is the app's event sink, for the work caddymodule does itself (a
// scheduled key rotation): emit once the change has committed.
func (a *App) Events() event.Sink { return a.events }

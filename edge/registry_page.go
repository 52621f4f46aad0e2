package edge

import (
	"html/template"
	"net/http"

	"github.com/palmgate/palmgate/core/agent"
	"github.com/palmgate/palmgate/core/palm"
)

// handleRegisterPage is the agent owner's page at registrationUrl: the QR code of the
// session's palm challenge and the agent's key fingerprint, or, with Accept:
// application/json, the challenge as JSON without its nonce (which only a scan of
// the QR code gives, so that whoever merely holds the URL cannot deny). Showing or
// polling the page renews the scan URL when due; HEAD changes nothing.
func (s *Server) handleRegisterPage(w http.ResponseWriter, r *http.Request) {
	session, err := s.agents.Session(r.Context(), r.PathValue("sessionId"))
	if err != nil {
		s.writeV1OrPage(w, r, err)
		return
	}
	c, err := s.agents.Challenge(r.Context(), session, r.Method != http.MethodHead)
	if err != nil {
		s.writeV1OrPage(w, r, err)
		return
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, challengeJSON{
			SessionID: session.ID, DeviceID: session.DeviceID, KeyFingerprint: c.Request.KeyFingerprint,
			ChallengeID: c.ID, ScanExpiresAt: &c.ScanExpiresAt, Status: c.Status, ExpiresAt: c.ExpiresAt,
		})
		return
	}
	d := challengePageData{
		Title: "Register an agent",
		Lines: []template.HTML{
			template.HTML("An agent asks to be registered as yours: <b><code>" + template.HTMLEscapeString(session.DeviceID) + "</code></b>"),
			template.HTML("Its key fingerprint: <b><code id=\"fingerprint\">" + template.HTMLEscapeString(c.Request.KeyFingerprint) + "</code></b>. Check that your agent printed the same one."),
			"Verify with your palm to confirm that you own it.",
		},
		// Once its poll is refused, the session's records are gone: collected
		// after its expiry (a completed or failed one too, shown as such until then).
		Gone:     "This registration request has expired or has already ended.",
		GoneTodo: "Ask the agent to start again.",
	}
	switch session.Status {
	case agent.SessionCompleted:
		d.StatusClass, d.Outcome = "ok", "Registered. The agent now appears under your identity."
	case agent.SessionFailed:
		d.StatusClass, d.Outcome = "bad", "Registration failed: it was declined, or this agent was registered by another session."
	case agent.SessionExpired:
		d.StatusClass, d.Outcome = "bad", "This registration request has expired. Ask the agent to start again."
	}
	if c.Status != palm.StatusPending && d.Outcome == "" {
		d.StatusClass, d.Outcome = "bad", "This request is closed."
	}
	if d.Outcome == "" && c.Status == palm.StatusPending && r.Method != http.MethodHead {
		if d.Cancel, err = s.declineForm(w, r, session); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	s.renderChallengePage(w, r, c, d)
}

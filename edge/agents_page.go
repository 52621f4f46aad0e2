package edge

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/agent"
	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/jsontime"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/internal/brand"
)

// The owner's agents page, /v1/human/agents: a person verifies with their palm
// and sees the agents registered to them, with a Remove button each. The browser
// is bound to its owner session (core/agent's OwnerSession) by a cookie holding
// the session's secret, so only the browser that opened the page gets the
// result of the palm scan; the session lives on the server (and ends with "Sign
// out", or after agent.OwnerSessionTTL). Every form carries the session's CSRF
// token. The page is built to take more sections for the same verified human
// (the agents' grants, issue 24): add a field to agentsPageData and a route
// beside the removal's, checked by ownerFromForm.

var agentsPage = template.Must(template.ParseFS(pageFiles, "pages/agents.html", "pages/base.html"))

// agentsPageData fills the page a verified owner sees.
type agentsPageData struct {
	Title     string
	Notice    string
	Agents    []agentRow
	Grants    []grantRow // agents_grants.go
	CSRF      string
	ExpiresAt pageTime
	CSPNonce  string
	Brand     brand.Brand
}

type agentRow struct {
	DeviceID, KeyFingerprint string
	RegisteredAt             pageTime
}

// ownerPageJSON is the page's JSON form (Accept: application/json): what its
// script polls while the palm challenge is open, and the list once verified.
type ownerPageJSON struct {
	Status        string             `json:"status"`
	ChallengeID   string             `json:"challengeId,omitempty"`
	Nonce         string             `json:"nonce,omitempty"`
	ScanURL       string             `json:"scanUrl,omitempty"`
	ScanExpiresAt *jsontime.Time     `json:"scanExpiresAt,omitempty"`
	HumanID       string             `json:"humanId,omitempty"`
	Agents        []agent.OwnedAgent `json:"agents,omitempty"`
	Grants        []actorGrantJSON   `json:"grants,omitempty"`
	ExpiresAt     *jsontime.Time     `json:"expiresAt,omitempty"`
}

// ownerCookieName is the cookie of the owner session: `__Host-` prefixed on an
// https issuer.
func (s *Server) ownerCookieName() string {
	if s.secureCookies() {
		return "__Host-palmgate_agents"
	}
	return "palmgate_agents"
}

// setOwnerCookie gives the browser the session secret for maxAge seconds (-1
// clears it). SameSite=Lax: no other site can make the browser send it with a
// form post (every form also carries the session's CSRF token), but a link from
// another site (a mail, an application's settings) brings the person to their
// page: with Strict the cookie was withheld there, and the page started a new
// palm challenge over the verified session's cookie.
func (s *Server) setOwnerCookie(w http.ResponseWriter, secret string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: s.ownerCookieName(), Value: secret, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: s.secureCookies(), SameSite: http.SameSiteLaxMode,
	})
}

// ownerSession returns the browser's owner session, or nil when it has none (or
// one that is gone: ended, or long expired).
func (s *Server) ownerSession(r *http.Request) (*agent.OwnerSession, error) {
	c, err := r.Cookie(s.ownerCookieName())
	if err != nil {
		return nil, nil
	}
	o, err := s.agents.OwnerSession(r.Context(), c.Value)
	if errors.Is(err, agent.ErrOwnerSessionNotFound) {
		return nil, nil
	}
	return o, err
}

// handleAgentsPage shows the palm challenge of the browser's owner session, or
// starts one (rate limited, as every unauthenticated write), or, once the palm
// verified it, the human's agents. HEAD and JSON polls start nothing.
func (s *Server) handleAgentsPage(w http.ResponseWriter, r *http.Request) {
	head := r.Method == http.MethodHead
	o, err := s.ownerSession(r)
	if err != nil {
		s.writeAgentsPageError(w, r, err)
		return
	}
	if o != nil && o.Status != agent.OwnerPending && o.Status != agent.OwnerVerified {
		// Declined on the phone, or expired: say so, and let a reload start anew.
		if head || wantsJSON(r) {
			writeJSON(w, http.StatusOK, ownerPageJSON{Status: string(o.Status)})
			return
		}
		s.setOwnerCookie(w, "", -1)
		s.renderSignedOutPage(w, r, http.StatusOK, signedOutPageData{
			Title: "Your agents", StatusClass: "bad", Outcome: "The palm verification was declined, or this page's session has expired.",
			Lines: []string{"Reload this page to start again."},
		})
		return
	}
	if o == nil {
		if wantsJSON(r) {
			// The palm step's poll of a session that is gone (never started, signed
			// out, or collected after its expiry): a refusal, on which the page says
			// so in its words (renderOwnerChallenge's Gone) and stops polling.
			s.writeAgentsPageError(w, r, agent.ErrOwnerSessionNotFound)
			return
		}
		if head {
			writeJSON(w, http.StatusOK, ownerPageJSON{Status: string(agent.OwnerExpired)})
			return
		}
		if refused := s.limiter.allow(r); refused != nil {
			s.writeAgentsPageError(w, r, refused)
			return
		}
		secret, o, c, err := s.agents.StartOwnerSession(r.Context(), palm.Request{
			BrowserIP: s.clientIP(r), BrowserSummary: userAgentSummary(r.UserAgent()), Address: s.limiter.address(r),
		})
		if err != nil {
			s.writeAgentsPageError(w, r, err)
			return
		}
		s.setOwnerCookie(w, secret, int((agent.OwnerChallengeTTL + agent.OwnerSessionTTL + palm.Grace).Seconds()))
		s.renderOwnerChallenge(w, r, o, c)
		return
	}
	if o.Status == agent.OwnerPending {
		c, err := s.agents.OwnerChallenge(r.Context(), o, !head)
		if err != nil {
			s.writeAgentsPageError(w, r, err)
			return
		}
		if wantsJSON(r) {
			j := ownerPageJSON{Status: string(c.Status), ChallengeID: c.ID, ExpiresAt: &c.ExpiresAt}
			if c.Status == palm.StatusPending {
				// This browser opened the session (its cookie): it may see the scan URL.
				j.Nonce, j.ScanURL, j.ScanExpiresAt = c.Nonce, s.palm.ScanURL(c), &c.ScanExpiresAt
			}
			writeJSON(w, http.StatusOK, j)
			return
		}
		s.renderOwnerChallenge(w, r, o, c)
		return
	}
	agents, err := s.agents.HumanAgents(r.Context(), o.HumanID)
	if err != nil {
		s.writeAgentsPageError(w, r, err)
		return
	}
	if wantsJSON(r) {
		_, grants, err := s.ownerGrants(r.Context(), o.HumanID)
		if err != nil {
			s.writeAgentsPageError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, ownerPageJSON{Status: string(o.Status), HumanID: o.HumanID, Agents: agents, Grants: grants, ExpiresAt: &o.ExpiresAt})
		return
	}
	s.renderAgentsPage(w, r, o, agents, "")
}

// renderOwnerChallenge is the palm step of the page.
func (s *Server) renderOwnerChallenge(w http.ResponseWriter, r *http.Request, o *agent.OwnerSession, c *palm.Challenge) {
	d := challengePageData{
		Title: "Your agents",
		Lines: []template.HTML{
			"Verify with your palm to see the agents registered to you and remove any of them.",
			"Your palm app shows this browser's address: check that it is yours.",
		},
		Gone:     "This palm verification has expired or has already ended.",
		GoneTodo: "Reload this page to start again.",
	}
	if o.Status == agent.OwnerPending && c.Status != palm.StatusPending {
		d.StatusClass, d.Outcome = "bad", "This request is closed. Reload the page to start again."
	}
	s.renderChallengePage(w, r, c, d)
}

// handleAgentsRemove removes one of the verified owner's agents (form: deviceId,
// csrf). An agent that is not theirs is 404, as an unknown one; a post without
// the session's CSRF token, or without a verified session, is 403.
func (s *Server) handleAgentsRemove(w http.ResponseWriter, r *http.Request) {
	o, form, err := s.ownerFromForm(w, r)
	if err != nil {
		s.writeAgentsPageError(w, r, err)
		return
	}
	// Its grants go with it (the registry's OnRemoved hook): its live tokens are
	// refused at once. When that fails, the removal still stands (removed_hook.go).
	removed, err := s.agents.RemoveOwned(r.Context(), o.HumanID, form.Get("deviceId"))
	if removed == nil {
		s.writeAgentsPageError(w, r, err)
		return
	}
	notice := "Removed " + removed.DeviceID + "."
	if err != nil {
		s.logger.Warn("palmgate: after removing an agent", zap.String("deviceId", removed.DeviceID), zap.Error(err))
		// The person may be removing a stolen agent: say that what it was
		// already given lives on (it gets nothing new: it is not registered).
		notice += " What it was already given could not be ended now: its access tokens keep working until they expire, within " +
			shortDuration(s.oidc.AccessTTL()) + "."
	}
	s.logger.Info("palmgate agent removed",
		zap.String("by", "owner"), zap.String("deviceId", removed.DeviceID), zap.String("humanId", removed.HumanID),
		zap.String("remote_ip", s.clientIP(r)))
	agents, err := s.agents.HumanAgents(r.Context(), o.HumanID)
	if err != nil {
		s.writeAgentsPageError(w, r, err)
		return
	}
	if wantsJSON(r) {
		// What is left, grants included, as the page's JSON and a revocation's
		// answer list it: without them a program would read that none are left.
		_, grants, err := s.ownerGrants(r.Context(), o.HumanID)
		if err != nil {
			s.writeAgentsPageError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, ownerPageJSON{Status: "removed", HumanID: o.HumanID, Agents: agents, Grants: grants, ExpiresAt: &o.ExpiresAt})
		return
	}
	s.renderAgentsPage(w, r, o, agents, notice)
}

// shortDuration writes d as people read it: "1h", "90m", "1h30m", "45s".
func shortDuration(d time.Duration) string {
	out := d.String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}

// handleAgentsSignout ends the owner session (form: csrf).
func (s *Server) handleAgentsSignout(w http.ResponseWriter, r *http.Request) {
	if _, _, err := s.ownerFromForm(w, r); err != nil {
		s.writeAgentsPageError(w, r, err)
		return
	}
	c, _ := r.Cookie(s.ownerCookieName())
	if err := s.agents.EndOwnerSession(r.Context(), c.Value); err != nil {
		s.writeAgentsPageError(w, r, err)
		return
	}
	s.setOwnerCookie(w, "", -1)
	s.renderSignedOutPage(w, r, http.StatusOK, signedOutPageData{
		Title: "Signed out", StatusClass: "ok", Outcome: "You are signed out of your agents page.",
		Lines: []string{"You can close this page."},
	})
}

// agentsPagePath is the agents page, where a person starts a new session.
const agentsPagePath = "/v1/human/agents"

// errNoOwnerSession refuses a form post without a verified owner session (ended,
// expired, or never verified), or with a CSRF token that is not its own.
var errNoOwnerSession = &fault.Error{Class: fault.Forbidden, Code: "forbidden", Message: "this page's session has ended or the form is not its own: open the page again"}

// ownerFromForm parses a form post of the agents page and returns its verified
// owner session, checking the CSRF token.
func (s *Server) ownerFromForm(w http.ResponseWriter, r *http.Request) (*agent.OwnerSession, url.Values, error) {
	params, err := formParams(w, r)
	if err != nil {
		return nil, nil, err
	}
	o, err := s.ownerSession(r)
	if err != nil {
		return nil, nil, err
	}
	if o == nil || o.Status != agent.OwnerVerified || !o.CheckCSRF(params.Get("csrf")) {
		return nil, nil, errNoOwnerSession
	}
	return o, params, nil
}

func (s *Server) renderAgentsPage(w http.ResponseWriter, r *http.Request, o *agent.OwnerSession, agents []agent.OwnedAgent, notice string) {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce) // crypto/rand never fails on supported platforms
	d := agentsPageData{
		Title: "Your agents", Notice: notice, CSRF: o.CSRF, ExpiresAt: clockTime(o.ExpiresAt),
		CSPNonce: base64.RawStdEncoding.EncodeToString(nonce), Brand: s.brand,
	}
	d.Grants, _, _ = s.ownerGrants(r.Context(), o.HumanID) // the page still lists the agents when this read fails
	for _, a := range agents {
		d.Agents = append(d.Agents, agentRow{DeviceID: a.DeviceID, KeyFingerprint: a.KeyFingerprint, RegisteredAt: dateTime(a.RegisteredAt)})
	}
	s.setPageHeaders(w.Header(), pagePolicy{nonce: d.CSPNonce, script: true, formAction: "'self'"})
	if r.Method == http.MethodHead {
		return
	}
	if err := agentsPage.Execute(w, d); err != nil {
		s.logger.Debug("writing agents page", zap.Error(err))
	}
}

// writeAgentsPageError is the page dialect's answer for the agents page: the
// status and message of the /v1 mapper, as a page (or the /v1 JSON body when
// JSON was asked for).
func (s *Server) writeAgentsPageError(w http.ResponseWriter, r *http.Request, err error) {
	if wantsJSON(r) {
		s.writeError(w, r, err)
		return
	}
	e, retry := v1Error(err)
	if e.Status == http.StatusInternalServerError {
		s.logger.Error("palmgate agents page failed", zap.String("method", r.Method), zap.Error(err))
	}
	if retry > 0 {
		setRetryAfter(w, retry)
	}
	if errors.Is(err, errNoOwnerSession) {
		// The page the person has open outlived its session (expired, signed out
		// in another tab, or ended by an operator: DELETE
		// /palmgate/humans/{humanId}/sessions): say so in words and offer a new one.
		s.renderSignedOutPage(w, r, e.Status, signedOutPageData{
			Title: "Your agents", StatusClass: "bad",
			Outcome: "This page's session has ended (it expired, was signed out, or was ended for you), or the form did not come from it.",
			Lines:   []string{"Nothing was changed. Verify with your palm again to see your agents."},
			Link:    agentsPagePath, LinkText: "Start again",
		})
		return
	}
	s.renderSignedOutPage(w, r, e.Status, signedOutPageData{
		Title: "Your agents", StatusClass: "bad", Outcome: e.Message,
		Lines: []string{"Nothing was changed."},
	})
}

package edge

import (
	"net/http"
	"strconv"

	"github.com/palmgate/palmgate/core/agent"
	"github.com/palmgate/palmgate/core/fault"
)

// registrationSession is the 201 answer of registration init.
type registrationSession struct {
	SessionID       string     `json:"sessionId"`
	RegistrationURL string     `json:"registrationUrl"`
	ExpiresAt       agent.Time `json:"expiresAt"`
}

// registrationStatus is the answer of the status endpoint.
type registrationStatus struct {
	Status       agent.SessionStatus `json:"status"`
	DeviceID     string              `json:"deviceId,omitempty"`
	Registration *registration       `json:"registration,omitempty"`
}

type registration struct {
	PublicKey    string     `json:"publicKey"`
	RegisteredAt agent.Time `json:"registeredAt"`
}

// readChallenge reads and parses an AgentChallenge body.
func readChallenge(w http.ResponseWriter, r *http.Request) (*agent.Challenge, error) {
	body, err := readJSONBody(w, r)
	if err != nil {
		return nil, err
	}
	return agent.ParseChallenge(body)
}

func (s *Server) handleRegisterInit(w http.ResponseWriter, r *http.Request) {
	c, err := readChallenge(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	session, err := s.agents.Init(r.Context(), c, s.limiter.address(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, registrationSession{
		SessionID:       session.ID,
		RegistrationURL: s.agents.RegistrationURL(session.ID),
		ExpiresAt:       session.ExpiresAt,
	})
}

func (s *Server) handleRegisterStatus(w http.ResponseWriter, r *http.Request) {
	session, err := s.agents.Session(r.Context(), r.PathValue("sessionId"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	answer := registrationStatus{Status: session.Status}
	if session.Status == agent.SessionCompleted {
		answer.DeviceID = session.DeviceID
		answer.Registration = &registration{PublicKey: session.PublicKey, RegisteredAt: session.RegisteredAt}
	}
	writeJSON(w, http.StatusOK, answer)
}

func (s *Server) handleVerifySignature(w http.ResponseWriter, r *http.Request) {
	c, err := readChallenge(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	check, err := s.agents.VerifySignature(r.Context(), c)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, check)
}

func (s *Server) handleLookupDevice(w http.ResponseWriter, r *http.Request) {
	lookup, err := s.agents.LookupDevice(r.Context(), r.PathValue("deviceId"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, lookup)
}

func (s *Server) handleLookupPublicKey(w http.ResponseWriter, r *http.Request) {
	key, err := agent.ParsePublicKey(r.PathValue("publicKey"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	lookup, err := s.agents.LookupPublicKey(r.Context(), key)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, lookup)
}

func (s *Server) handleLeaderboard(w http.ResponseWriter, r *http.Request) {
	limit := agent.DefaultLeaderboardLimit
	if q := r.URL.Query().Get("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > agent.MaxLeaderboardLimit {
			s.writeError(w, r, fault.Field(fault.Invalid, fault.CodeInvalidField, "limit",
				"limit must be an integer from 1 to %d", agent.MaxLeaderboardLimit))
			return
		}
		limit = n
	}
	body, err := s.agents.LeaderboardJSON(r.Context(), limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

package edge

import (
	"encoding/json"
	"net/http"

	"github.com/palmgate/palmgate/core/agent"
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

// lookup is the answer of the lookups: an unknown agent has registeredAt "never".
type lookup struct {
	Registered   bool   `json:"registered"`
	Verified     bool   `json:"verified"`
	HumanID      string `json:"humanId,omitempty"`
	RegisteredAt any    `json:"registeredAt"`
}

func lookupOf(l *agent.Lookup) lookup {
	if !l.Registered {
		return lookup{RegisteredAt: "never"}
	}
	return lookup{Registered: true, Verified: l.Verified, HumanID: l.HumanID, RegisteredAt: l.RegisteredAt}
}

type registration struct {
	PublicKey    string     `json:"publicKey"`
	RegisteredAt agent.Time `json:"registeredAt"`
}

func (s *Server) handleRegisterInit(w http.ResponseWriter, r *http.Request) {
	body, err := readJSONBody(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	session, err := s.agents.InitRequest(r.Context(), body, s.limiter.address(r))
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
	body, err := readJSONBody(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	check, err := s.agents.VerifySignatureRequest(r.Context(), body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSONBody(w, http.StatusOK, signatureAnswers[boolIndex(check.Verified)][boolIndex(check.Registered)])
}

// signatureAnswers are the four bodies verify/signature answers, by verified and
// registered, encoded once as writeJSON would encode them: the hottest route of
// /v1 then spends nothing on encoding its answer.
var signatureAnswers = func() (a [2][2][]byte) {
	for _, v := range []bool{false, true} {
		for _, reg := range []bool{false, true} {
			b, _ := json.Marshal(agent.SignatureCheck{Verified: v, Registered: reg})
			a[boolIndex(v)][boolIndex(reg)] = append(b, '\n')
		}
	}
	return a
}()

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (s *Server) handleLookupDevice(w http.ResponseWriter, r *http.Request) {
	l, err := s.agents.LookupDevice(r.Context(), r.PathValue("deviceId"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, lookupOf(l))
}

func (s *Server) handleLookupPublicKey(w http.ResponseWriter, r *http.Request) {
	key, err := s.agents.ParsePublicKey(r.PathValue("publicKey"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	l, err := s.agents.LookupPublicKey(r.Context(), key)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, lookupOf(l))
}

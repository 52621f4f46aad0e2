package edge

import (
	"net/http"

	"github.com/palmgate/palmgate/core/palm"
)

// palmStatus is the answer of the completing palm endpoints.
type palmStatus struct {
	Status palm.Status `json:"status"`
}

// handlePalmChallenge answers the mobile app that opened a scan URL: the challenge
// and what the person is asked to approve. A wrong nonce is a 404. A browser
// (acceptsHTML) gets the page of a phone without the app instead (palmapp.go).
func (s *Server) handlePalmChallenge(w http.ResponseWriter, r *http.Request) {
	c, err := s.palm.Lookup(r.Context(), r.PathValue("challengeId"), r.URL.Query().Get("nonce"))
	if err != nil {
		s.writeV1OrPage(w, r, err)
		return
	}
	if acceptsHTML(r) {
		s.renderPalmAppPage(w, r)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) handlePalmAssertion(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Assertion string `json:"assertion"`
	}
	if err := decodeJSON(w, r, &body); err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := s.palm.Complete(r.Context(), r.PathValue("challengeId"), body.Assertion)
	s.answerPalm(w, r, c, err)
}

func (s *Server) handlePalmDeny(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Nonce string `json:"nonce"`
	}
	if err := decodeJSON(w, r, &body); err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := s.palm.Deny(r.Context(), r.PathValue("challengeId"), body.Nonce)
	s.answerPalm(w, r, c, err)
}

// handlePalmDevScan completes a challenge as if the palm engine had recognised the
// given palm subject. Without dev mode the route does not exist (404).
func (s *Server) handlePalmDevScan(w http.ResponseWriter, r *http.Request) {
	if !s.palm.Dev() {
		s.writeError(w, r, palm.ErrNoDevAttestor)
		return
	}
	var body struct {
		Nonce       string `json:"nonce"`
		PalmSubject string `json:"palmSubject"`
	}
	if err := decodeJSON(w, r, &body); err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := s.palm.DevScan(r.Context(), r.PathValue("challengeId"), body.Nonce, body.PalmSubject)
	s.answerPalm(w, r, c, err)
}

func (s *Server) answerPalm(w http.ResponseWriter, r *http.Request, c *palm.Challenge, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, palmStatus{Status: c.Status})
}

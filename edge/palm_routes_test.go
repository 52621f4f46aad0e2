package edge_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPalmChallengeLookup: the scan URL answers the mobile app what it is asked
// to approve (the client, the scopes in words, the browser); a wrong nonce or an
// unknown challenge is 404 challenge_not_found, and no raw palm subject shows.
func TestPalmChallengeLookup(t *testing.T) {
	e := newEnv(t)
	l := e.authorize(t, authorizeQuery())
	id, nonce := e.challenge(t, l)

	w := e.getJSON(t, "/v1/palm/challenges/"+id+"?nonce="+nonce)
	wantStatus(t, w, http.StatusOK)
	m := decode(t, w)
	if m["challengeId"] != id || m["purpose"] != "login" || m["status"] != "pending" {
		t.Errorf("challenge = %s, want the pending login challenge", w.Body)
	}
	request, _ := m["request"].(map[string]any)
	if request["clientName"] != "Example App" || request["browserIp"] != "192.0.2.10" || request["browserSummary"] != "Firefox on Linux" {
		t.Errorf("request = %v, want the client's name and the browser", request)
	}
	if d, _ := request["scopeDescriptions"].([]any); len(d) == 0 {
		t.Errorf("request = %v, want the scopes in words", request)
	}

	wantV1Error(t, e.get(t, "/v1/palm/challenges/"+id+"?nonce=wrong"), http.StatusNotFound, "challenge_not_found", "")
	wantV1Error(t, e.get(t, "/v1/palm/challenges/"+id), http.StatusNotFound, "challenge_not_found", "")
	wantV1Error(t, e.get(t, "/v1/palm/challenges/00000000-0000-4000-8000-000000000000?nonce="+nonce), http.StatusNotFound, "challenge_not_found", "")

	e.devScan(t, id, nonce, "alice-palm-subject")
	w = e.getJSON(t, "/v1/palm/challenges/"+id+"?nonce="+nonce)
	if strings.Contains(w.Body.String(), "alice-palm-subject") {
		t.Errorf("the challenge shows the palm subject: %s", w.Body)
	}
}

// TestPalmAssertion: a trusted attestor's assertion verifies the challenge once;
// each refusal has its status and stable code.
func TestPalmAssertion(t *testing.T) {
	e := newEnv(t)
	post := func(id, body string) *recorder {
		return e.postJSON(t, "/v1/palm/challenges/"+id+"/assertion", body)
	}
	assert := func(id, a string) *recorder {
		return e.postJSON(t, "/v1/palm/challenges/"+id+"/assertion", map[string]string{"assertion": a})
	}

	id, nonce := e.challenge(t, e.authorize(t, authorizeQuery()))
	now := e.clock.Now()
	wantV1Error(t, assert(id, "not-a-jws"), http.StatusBadRequest, "invalid_assertion", "")
	forged := assertion(t, id, nonce, "bob", now)
	forged = forged[:len(forged)-4] + "AAAA"
	wantV1Error(t, assert(id, forged), http.StatusUnauthorized, "assertion_refused", "")
	wantV1Error(t, assert(id, assertion(t, id, "another-nonce", "bob", now)), http.StatusUnauthorized, "assertion_refused", "")
	wantV1Error(t, assert("00000000-0000-4000-8000-000000000000", assertion(t, "00000000-0000-4000-8000-000000000000", nonce, "bob", now)), http.StatusNotFound, "challenge_not_found", "")
	wantV1Error(t, post(id, `{"assertion":1}`), http.StatusBadRequest, "invalid_body", "")
	wantV1Error(t, post(id, `[]`), http.StatusBadRequest, "invalid_body", "")

	w := assert(id, assertion(t, id, nonce, "bob", now))
	wantStatus(t, w, http.StatusOK)
	if m := decode(t, w); m["status"] != "verified" {
		t.Fatalf("status = %v, want verified", m["status"])
	}
	wantV1Error(t, assert(id, assertion(t, id, nonce, "bob", now)), http.StatusConflict, "challenge_not_pending", "")

	// A challenge whose time is up.
	id, nonce = e.challenge(t, e.authorize(t, authorizeQuery()))
	e.clock.Advance(11 * time.Minute)
	w = assert(id, assertion(t, id, nonce, "bob", e.clock.Now()))
	wantStatus(t, w, http.StatusGone)
	if code := decode(t, w)["code"]; code != "challenge_expired" && code != "scan_url_expired" {
		t.Errorf("code = %v, want challenge_expired", code)
	}
}

// TestPalmDeny: the person declines with the nonce; a wrong nonce is refused
// and the challenge stays pending.
func TestPalmDeny(t *testing.T) {
	e := newEnv(t)
	id, nonce := e.challenge(t, e.authorize(t, authorizeQuery()))
	wantV1Error(t, e.postJSON(t, "/v1/palm/challenges/"+id+"/deny", map[string]string{"nonce": "wrong"}), http.StatusNotFound, "challenge_not_found", "")
	wantV1Error(t, e.postJSON(t, "/v1/palm/challenges/"+id+"/deny", `{"nonce":"a","nonce":"b"}`), http.StatusBadRequest, "invalid_body", "nonce")
	w := e.postJSON(t, "/v1/palm/challenges/"+id+"/deny", map[string]string{"nonce": nonce})
	wantStatus(t, w, http.StatusOK)
	if m := decode(t, w); m["status"] != "denied" {
		t.Errorf("status = %v, want denied", m["status"])
	}
	wantV1Error(t, e.postJSON(t, "/v1/palm/challenges/"+id+"/deny", map[string]string{"nonce": nonce}), http.StatusConflict, "challenge_not_pending", "")
}

// TestPalmDevScan: dev-scan completes a challenge in dev mode, and is 404
// not_found without it.
func TestPalmDevScan(t *testing.T) {
	e := newEnv(t)
	id, nonce := e.challenge(t, e.authorize(t, authorizeQuery()))
	wantV1Error(t, e.postJSON(t, "/v1/palm/challenges/"+id+"/dev-scan", map[string]string{"nonce": "wrong", "palmSubject": "alice"}), http.StatusNotFound, "challenge_not_found", "")
	e.devScan(t, id, nonce, "alice")
	wantV1Error(t, e.postJSON(t, "/v1/palm/challenges/"+id+"/dev-scan", map[string]string{"nonce": nonce, "palmSubject": "alice"}), http.StatusConflict, "challenge_not_pending", "")

	prod := newEnv(t, withoutDev)
	l := prod.authorize(t, authorizeQuery())
	id, nonce = prod.challenge(t, l)
	wantV1Error(t, prod.postJSON(t, "/v1/palm/challenges/"+id+"/dev-scan", map[string]string{"nonce": nonce, "palmSubject": "alice"}), http.StatusNotFound, "not_found", "")
	w := prod.do(t, req{method: http.MethodGet, target: "/oauth2/verify?auth_request_id=" + l.id, cookies: []*http.Cookie{l.cookie}})
	wantPage(t, w, http.StatusOK, "Example App")
	if strings.Contains(w.Body.String(), "Simulate palm scan") {
		t.Error("a page outside dev mode offers to simulate a scan")
	}
}

package edge

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/storage"
)

// TestDecodeJSONExactKeys: the palm bodies (assertion, deny, dev-scan) match keys
// exactly, ignore case variants like other unknown keys, and refuse a key given
// twice with invalid_body naming it.
func TestDecodeJSONExactKeys(t *testing.T) {
	type scan struct {
		Nonce       string `json:"nonce"`
		PalmSubject string `json:"palmSubject"`
	}
	decode := func(body string) (scan, *v1Body) {
		r := httptest.NewRequest(http.MethodPost, "/v1/palm/challenges/x/dev-scan", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		var v scan
		if err := decodeJSON(httptest.NewRecorder(), r, &v); err != nil {
			e, _ := v1Error(err)
			return v, e
		}
		return v, nil
	}
	for _, tt := range []struct {
		name, body string
		want       scan
	}{
		{"exact keys", `{"nonce":"n","palmSubject":"alice"}`, scan{"n", "alice"}},
		{"case variants are unknown keys", `{"Nonce":"n","PALMSUBJECT":"alice"}`, scan{}},
		{"case variant after the exact key", `{"nonce":"n","palmSubject":"alice","PalmSubject":"mallory"}`, scan{"n", "alice"}},
		{"unknown keys are ignored", `{"nonce":"n","extra":[1,{"a":1,"a":2}]}`, scan{Nonce: "n"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decode(tt.body)
			if err != nil {
				t.Fatalf("decodeJSON: %+v", err)
			}
			if got != tt.want {
				t.Errorf("decoded %+v, want %+v", got, tt.want)
			}
		})
	}
	for _, tt := range []struct{ name, body, field string }{
		{"key twice", `{"nonce":"wrong","nonce":"n","palmSubject":"alice"}`, "nonce"},
		{"key twice, same value", `{"nonce":"n","palmSubject":"alice","palmSubject":"alice"}`, "palmSubject"},
		{"unknown key twice", `{"nonce":"n","x":1,"x":1}`, "x"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decode(tt.body)
			if err == nil {
				t.Fatalf("decodeJSON accepted it as %+v", got)
			}
			if err.Status != http.StatusBadRequest || err.Code != "invalid_body" || err.Details["field"] != tt.field {
				t.Errorf("error %d %s %v, want 400 invalid_body with details.field %q", err.Status, err.Code, err.Details, tt.field)
			}
		})
	}
	for _, body := range []string{`{"nonce":"n"} {}`, `{"nonce":5}`, `{"nonce":"n"`} {
		if _, err := decode(body); err == nil || err.Code != "invalid_body" {
			t.Errorf("decodeJSON(%s) = %+v, want invalid_body", body, err)
		}
	}
}

// TestV1ErrorCodes pins the status and code of each error of core in the /v1
// dialect (the README's error tables).
func TestV1ErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"malformed assertion", fmt.Errorf("%w: bad base64", palm.ErrMalformed), 400, "invalid_assertion"},
		{"refused assertion", fmt.Errorf("%w: unknown attestor", palm.ErrBadAssertion), 401, "assertion_refused"},
		{"unknown challenge", palm.ErrNotFound, 404, "challenge_not_found"},
		{"not pending", palm.ErrNotPending, 409, "challenge_not_pending"},
		{"expired", palm.ErrExpired, 410, "challenge_expired"},
		{"scan URL lapsed", palm.ErrScanLapsed, 410, "scan_url_expired"},
		{"no dev attestor", palm.ErrNoDevAttestor, 404, "not_found"},
		{"busy", busyFault(false, time.Second), 503, "too_many_pending_requests"},
		{"network busy", busyFault(true, time.Second), 429, "too_many_pending_from_network"},
		{"store down", fmt.Errorf("x: %w", storage.ErrUnavailable), 503, "storage_unavailable"},
		{"body", fault.New(fault.Invalid, fault.CodeInvalidBody, "body is not a JSON object"), 400, "invalid_body"},
		{"anything else", errors.New("boom"), 500, "internal_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := v1Error(tc.err)
			if e.Status != tc.status || e.Code != tc.code {
				t.Errorf("v1Error(%v) = %d %s, want %d %s", tc.err, e.Status, e.Code, tc.status, tc.code)
			}
			if tc.code != "internal_error" && tc.code != "storage_unavailable" && e.Message != tc.err.Error() {
				t.Errorf("message %q, want %q", e.Message, tc.err.Error())
			}
		})
	}
}

// TestOAuthBusy: at authorize, the global cap of pending logins answers 503 and a
// network's own cap 429, both temporarily_unavailable with the Retry-After the
// cap gave, rounded up to whole seconds.
func TestOAuthBusy(t *testing.T) {
	s := &Server{}
	for _, tc := range []struct {
		name   string
		err    error
		status int
		retry  string
	}{
		{"global cap", busyFault(false, 90*time.Second+time.Millisecond), 503, "91"},
		{"network cap", busyFault(true, 7*time.Second), 429, "7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			s.writeOAuthError(w, httptest.NewRequest("GET", "/oauth2/authorize", nil), tc.err)
			if w.Code != tc.status || w.Header().Get("Retry-After") != tc.retry || !strings.Contains(w.Body.String(), `"error":"temporarily_unavailable"`) {
				t.Errorf("answer %d, Retry-After %q, body %s; want %d, %s, temporarily_unavailable", w.Code, w.Header().Get("Retry-After"), w.Body, tc.status, tc.retry)
			}
		})
	}
}

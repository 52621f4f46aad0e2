package edge

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDecodeJSONExactKeys: the palm bodies (assertion, deny, dev-scan) match keys
// exactly, ignore case variants like other unknown keys, and refuse a key given
// twice with invalid_body naming it.
func TestDecodeJSONExactKeys(t *testing.T) {
	type scan struct {
		Nonce       string `json:"nonce"`
		PalmSubject string `json:"palmSubject"`
	}
	decode := func(body string) (scan, *apiError) {
		r := httptest.NewRequest(http.MethodPost, "/v1/palm/challenges/x/dev-scan", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		var v scan
		err := decodeJSON(httptest.NewRecorder(), r, &v)
		return v, err
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

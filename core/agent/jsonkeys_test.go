package agent

import (
	"strings"
	"testing"
)

// TestParseChallengeExactKeys: keys match the AgentChallenge's field names
// exactly. A case variant is an unknown key, ignored as unknown keys are, and a key
// given twice is refused: encoding/json alone took {"deviceId":"a","DEVICEID":"b"}
// as deviceId "b" while a case-sensitive reader sees "a".
func TestParseChallengeExactKeys(t *testing.T) {
	a := newTestAgent(t, "agent-1", "exact-keys")
	valid := string(mustJSON(t, a.fields("m-register-1", 1))) // keys sorted: deviceId first
	// with puts raw members at the front of the valid body.
	with := func(members string) string { return "{" + members + "," + valid[1:] }

	t.Run("case variants are ignored", func(t *testing.T) {
		for _, members := range []string{
			`"DEVICEID":"agent-2"`, `"DeviceId":"agent-2"`, `"deviceid":"agent-2"`,
			`"PUBLICKEY":"x","Message":"y","SIGNATURE":"z","Timestamp":7`,
		} {
			c, err := ParseChallenge([]byte(with(members)))
			if err != nil {
				t.Fatalf("%s: ParseChallenge: %v", members, err)
			}
			if c.DeviceID != "agent-1" || c.Message != "m-register-1" || c.Timestamp != 1 || !c.Verify() {
				t.Errorf("%s: parsed %+v, want the exact keys' values", members, c)
			}
		}
		// The variant after the exact key, where encoding/json's last-wins applied.
		body := strings.Replace(valid, `}`, `,"DEVICEID":"agent-2"}`, 1)
		if c, err := ParseChallenge([]byte(body)); err != nil || c.DeviceID != "agent-1" {
			t.Errorf("DEVICEID after deviceId: %+v, %v; want deviceId agent-1", c, err)
		}
	})
	t.Run("case variant alone is a missing field", func(t *testing.T) {
		f := a.fields("m-register-1", 1)
		f["DeviceId"] = f["deviceId"]
		delete(f, "deviceId")
		_, err := ParseChallenge(mustJSON(t, f))
		wantError(t, err, ErrInvalid, CodeMissingField, "deviceId")
	})
	t.Run("unknown keys are ignored", func(t *testing.T) {
		if _, err := ParseChallenge([]byte(with(`"extra":{"deviceId":"x"},"n":[1,2]`))); err != nil {
			t.Errorf("ParseChallenge: %v", err)
		}
	})
	for _, tt := range []struct{ name, members, field string }{
		{"deviceId twice", `"deviceId":"agent-2"`, "deviceId"},
		{"deviceId twice, same value", `"deviceId":"agent-1"`, "deviceId"},
		{"publicKey twice", `"publicKey":"x"`, "publicKey"},
		{"message twice", `"message":"another"`, "message"},
		{"signature twice", `"signature":"x"`, "signature"},
		{"timestamp twice", `"timestamp":2`, "timestamp"},
		{"timestamp twice, wrong type first", `"timestamp":"2"`, "timestamp"},
		{"deviceId twice, null first", `"deviceId":null`, "deviceId"},
		{"unknown key twice", `"x":1,"x":2`, "x"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseChallenge([]byte(with(tt.members)))
			if err == nil {
				t.Fatalf("ParseChallenge accepted it as %+v", c)
			}
			wantError(t, err, ErrInvalid, CodeInvalidBody, tt.field)
		})
	}
}

package bearer

import (
	"testing"

	"github.com/palmgate/palmgate/core/fault"
)

func TestAgentsMode(t *testing.T) {
	person := &Claims{}
	agent := &Claims{Act: &Actor{Subject: "bot", Profile: ActorProfileAgent}}
	for _, tc := range []struct {
		mode          string
		person, agent bool // admitted
	}{
		{"", true, false},
		{"deny", true, false},
		{"allow", true, true},
		{"only", false, true},
	} {
		m, err := ParseAgentsMode(tc.mode)
		if err != nil {
			t.Fatalf("ParseAgentsMode(%q): %v", tc.mode, err)
		}
		for _, c := range []struct {
			claims *Claims
			want   bool
		}{{person, tc.person}, {agent, tc.agent}} {
			err := m.Admit(c.claims)
			if (err == nil) != c.want {
				t.Errorf("mode %q, act %v: Admit = %v; want admitted %v", tc.mode, c.claims.Act, err, c.want)
			}
			if f, ok := fault.As(err); err != nil && (!ok || f.Class != fault.Forbidden || f.Code != CodeInsufficientScope) {
				t.Errorf("mode %q: refusal %v; want 403 insufficient_scope", tc.mode, err)
			}
		}
	}
	if _, err := ParseAgentsMode("sometimes"); err == nil {
		t.Error("ParseAgentsMode(sometimes) accepted")
	}
}

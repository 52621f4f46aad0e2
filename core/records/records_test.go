package records

import "testing"

func TestKind(t *testing.T) {
	for key, want := range map[string]string{
		"agent/d/a": "agent/d", "agent/d/b/c": "agent/d", "agent/s/x": "agent/s",
		"keys/ES256/k1": "keys/ES256", "oidc/pairwise-secret": "oidc", "lonely": "lonely", "": "",
	} {
		if got := Kind([]byte(key)); got != want {
			t.Errorf("Kind(%q) = %q, want %q", key, got, want)
		}
	}
}

package edge_test

import (
	"net/http"
	"net/url"
	"testing"
)

// TestDeviceIDDotSegments (third review, finding 5): the deviceIds "." and ".."
// were registered, but no URL names them: as a path segment every client and
// RFC 3986 5.2.4 remove them (%2E too, 6.2.2.2), palmgate answers such a path
// 404 and Caddy's admin endpoint redirects it, so the agent could be neither
// looked up (/v1/agent/verify/device/{deviceId}) nor removed by the operator
// (DELETE /palmgate/agents/{deviceId}, `caddy palmgate agent remove`). init
// refuses them; other ids of dots are ordinary.
func TestDeviceIDDotSegments(t *testing.T) {
	e := newEnv(t)
	for _, id := range []string{".", ".."} {
		w := e.postJSON(t, "/v1/agent/register/init", newAgent(id).registration(e.clock.Now()))
		wantV1Error(t, w, http.StatusBadRequest, "invalid_field", "deviceId")
	}
	e.register(t, newAgent("..."), "alice")
	w := e.get(t, "/v1/agent/verify/device/"+url.PathEscape("..."))
	wantStatus(t, w, http.StatusOK)
	if m := decode(t, w); m["registered"] != true {
		t.Errorf("lookup of ... = %s, want registered", w.Body)
	}
}

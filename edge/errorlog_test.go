package edge_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/palmgate/palmgate/edge"
	"github.com/palmgate/palmgate/storage"
)

// TestErrorLogNamesNoSessionID (third review, finding 9): a registration
// session's id is its owner's capability (the registration URL; the shipped
// access-log filter replaces it), but a request on /v1/agent/register/{id}/...
// that failed with a 500 logged the id twice: in the path and in the error
// ("registration session <id>"). The log names the route instead.
func TestErrorLogNamesNoSessionID(t *testing.T) {
	e := newEnv(t)
	core, logs := observer.New(zapcore.DebugLevel)
	e.srv = edge.New(edge.Config{Issuer: testIssuer, Palm: e.palm, Agents: e.agents, OIDC: e.oidc, Keys: e.keys,
		Store: e.store, Logger: zap.New(core)})
	w := e.postJSON(t, "/v1/agent/register/init", newAgent("log-bot").registration(e.clock.Now()))
	wantStatus(t, w, http.StatusCreated)
	id, _ := decode(t, w)["sessionId"].(string)
	// A record the store holds damaged: the status route fails with a 500.
	if err := e.store.Update(context.Background(), func(txn storage.Txn) error {
		return txn.Set([]byte("agent/s/"+id), []byte("{damaged"), 0)
	}); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, e.get(t, "/v1/agent/register/"+id+"/status"), http.StatusInternalServerError)
	if logs.Len() == 0 {
		t.Fatal("the 500 was not logged")
	}
	for _, l := range logs.All() {
		line := l.Message
		for k, v := range l.ContextMap() {
			line += " " + k + "=" + fmt.Sprint(v)
		}
		if strings.Contains(line, id) {
			t.Errorf("a log line names the registration session id: %s", line)
		}
		if !strings.Contains(line, "/v1/agent/register/{sessionId}/status") {
			t.Errorf("a log line does not name the route: %s", line)
		}
	}
}

package oidc

import (
	"context"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/core/agent"
)

// TestActorLongDeviceID (third review, finding 7): the registry registers
// deviceIds of up to agent.MaxDeviceIDLen (256) bytes, but requested_actor was
// bounded at 128: the agent of a person whose deviceId is longer could never be
// let act for them (invalid_request "must be an agent's deviceId"). The bound is
// the registry's; one byte more is still refused.
func TestActorLongDeviceID(t *testing.T) {
	if maxActorIDLen != agent.MaxDeviceIDLen {
		t.Errorf("maxActorIDLen = %d, want the registry's MaxDeviceIDLen %d", maxActorIDLen, agent.MaxDeviceIDLen)
	}
	h := newActorHarness(t)
	long := "bot-" + strings.Repeat("x", agent.MaxDeviceIDLen-4)
	key := h.agents.register(t, long, h.alice)
	if r := h.consent(t, "alice", long); r.Code == "" || r.Error != "" {
		t.Fatalf("consent for a %d-byte deviceId = %+v, want a code", len(long), r)
	}
	if _, err := h.agentToken(h.assertion(t, long, key, nil)); err != nil {
		t.Fatalf("agent token for a %d-byte deviceId: %v", len(long), err)
	}
	_, err := h.svc.Authorize(context.Background(), params(RequestedActorParam, long+"x"), testBrowser)
	if oe, ok := asOAuthErr(err); !ok || oe.RedirectURI != appRedirect {
		t.Fatalf("Authorize with a %d-byte requested_actor = %v; want a refusal back to the client", len(long)+1, err)
	}
}

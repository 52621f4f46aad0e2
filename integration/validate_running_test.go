package integration

import (
	"strings"
	"testing"

	"github.com/palmgate/palmgate/internal/testserver"
)

// TestValidateWhileRunning: `caddy validate` (and `caddy adapt --validate`) of the config a running Caddy
// serves with `storage badger` passes (the step before `caddy reload`), rather
// than failing on the directory lock that running Caddy holds; a bad value is
// still refused by name (fourth review).
func TestValidateWhileRunning(t *testing.T) {
	t.Parallel()
	e := start(t, testserver.Options{})
	if !strings.Contains(e.Config(), "storage badger") {
		t.Fatalf("the test server does not run on badger, which this test is about:\n%s", e.Config())
	}
	out, err := e.RunCommand(t, "validate", "--config", e.ConfigPath, "--adapter", "caddyfile")
	if err != nil || !strings.Contains(out, "Valid configuration") {
		t.Fatalf("caddy validate of the running config: %v\n%s", err, out)
	}
	out, err = e.RunCommand(t, "adapt", "--config", e.ConfigPath, "--adapter", "caddyfile", "--validate")
	if err != nil || strings.Contains(out, "is in use by another process") {
		t.Fatalf("caddy adapt --validate of the running config: %v\n%s", err, out)
	}
	e.Reload(t, "access_token_ttl 2h")
	if _, err := e.TryReload(t, "access_token_ttl -5m"); err == nil {
		t.Fatal("reload with access_token_ttl -5m succeeded")
	}
	// TryReload wrote the refused config: validate names the option.
	out, err = e.RunCommand(t, "validate", "--config", e.ConfigPath, "--adapter", "caddyfile")
	if err == nil || !strings.Contains(out, "access_token_ttl") {
		t.Errorf("caddy validate of a config with access_token_ttl -5m: %v\n%s", err, out)
	}
}

package service

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/palmgate/palmgate/bench/minimal"
	"github.com/palmgate/palmgate/internal/loadgen"
	"github.com/palmgate/palmgate/internal/testserver"
)

// minimalCaddyfile is the site of the scenario minimal-caddy: the bench's own
// build of Caddy (bench/minimalcaddy/cmd/caddy-minimal) with the minimal
// server's verify handler where palmgate's site has palmgate, in the same site
// shape as caddyfile's: http://127.0.0.1:{port}, the admin API on,
// persist_config off, the handler before the same `handle /static`.
const minimalCaddyfile = `{
	admin 127.0.0.1:{adminport}
	persist_config off
}

http://127.0.0.1:{port} {
	minimal_verify
	handle /static {
		respond "ok" 200
	}
}
`

// minimalCaddyEnv names a caddy-minimal binary already built; unset, the load
// script builds one into a temporary directory, once a run.
const minimalCaddyEnv = "PALMGATE_BENCH_CADDY_MINIMAL"

// minimalCaddy is the running bench build of Caddy serving the minimal handler.
type minimalCaddy struct {
	*testserver.Server
	host string
	pid  int
}

// startMinimalCaddy builds (unless minimalCaddyEnv names one) and starts the
// bench's own Caddy with the minimal verify handler, and checks that it
// answers as palmgate does (minimal.Check, TestMinimalServer's checks).
func startMinimalCaddy(t testing.TB) minimalCaddy {
	t.Helper()
	bin := os.Getenv(minimalCaddyEnv)
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "caddy-minimal")
		start := time.Now()
		cmd := exec.Command("go", "build", "-o", bin, "github.com/palmgate/palmgate/bench/minimalcaddy/cmd/caddy-minimal")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building caddy-minimal: %v\n%s", err, out)
		}
		logf("built the bench's caddy-minimal in %s", time.Since(start).Round(time.Millisecond))
	}
	srv := testserver.Start(t, testserver.Options{Caddyfile: minimalCaddyfile, Binary: bin})
	m := minimalCaddy{Server: srv, host: strings.TrimPrefix(srv.URL, "http://"), pid: loadgen.FindPID(srv.ConfigPath)}
	if m.pid == 0 {
		t.Fatalf("no caddy-minimal process runs %s", srv.ConfigPath)
	}
	if err := minimal.Check(postTo(srv.URL)); err != nil {
		t.Fatalf("the minimal handler in Caddy does not answer as palmgate does: %v", err)
	}
	logf("caddy-minimal (pid %d) answers on %s", m.pid, srv.URL)
	return m
}

// postTo posts to verify/signature of the server at base on a connection of
// its own.
func postTo(base string) minimal.Post {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	return func(body []byte) (int, http.Header, []byte, error) {
		resp, err := client.Post(base+minimal.VerifyPath, "application/json", bytes.NewReader(body))
		if err != nil {
			return 0, nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b, err
	}
}

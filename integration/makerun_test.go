package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/testserver"
	"github.com/palmgate/palmgate/internal/tooltest"
)

// devExposedWarning is the start of the WARN line of a dev mode palmgate that
// listens beyond loopback (caddymodule/devlisten.go).
const devExposedWarning = "palmgate dev mode on a listener beyond loopback"

// makeRun is what `make run PORT=port ADMIN_PORT=adminPort` would run, as `make -n`
// prints it: the line it prints at start, and the command (environment, binary,
// arguments) it starts.
type makeRun struct {
	startLine string
	env       []string
	binary    string
	args      []string
}

// readMakeRun asks make what `make run` does with these ports, without running it.
func readMakeRun(t *testing.T, port, adminPort int) makeRun {
	t.Helper()
	mk, err := exec.LookPath("make")
	if err != nil {
		tooltest.Missing(t, "make run test: make is not on PATH (install: apt-get install make)")
	}
	cmd := exec.Command(mk, "-n", "--no-print-directory", "run", "PORT="+strconv.Itoa(port), "ADMIN_PORT="+strconv.Itoa(adminPort))
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n run: %v\n%s", err, out)
	}
	var r makeRun
	for _, line := range strings.Split(string(out), "\n") {
		if s, ok := strings.CutPrefix(line, "echo "); ok {
			r.startLine = strings.Trim(s, `"'`)
			continue
		}
		if !strings.Contains(line, " run --config ") {
			continue
		}
		fields := strings.Fields(line)
		for len(fields) > 0 && strings.Contains(fields[0], "=") {
			r.env = append(r.env, fields[0])
			fields = fields[1:]
		}
		if len(fields) == 0 {
			t.Fatalf("make -n run: no command in %q", line)
		}
		r.binary, r.args = fields[0], fields[1:]
	}
	if r.binary == "" || r.startLine == "" {
		t.Fatalf("make -n run printed no start line or no `run --config` command:\n%s", out)
	}
	return r
}

// TestMakeRunLoopbackOnly runs the binary and config `make run` runs, with the
// ports make passes it, and checks that it answers on 127.0.0.1 and on nothing
// else: its dev mode lets whoever reaches it simulate a palm scan (issue 22,
// item 4).
func TestMakeRunLoopbackOnly(t *testing.T) {
	t.Parallel()
	port, adminPort := testserver.FreePort(t), testserver.FreePort(t)
	r := readMakeRun(t, port, adminPort)

	// The line printed at start names the demo, the portal and the admin API.
	for _, want := range []string{
		fmt.Sprintf("http://localhost:%d/demo", port),
		fmt.Sprintf("http://localhost:%d/portal", port),
		fmt.Sprintf("localhost:%d", adminPort),
		"loopback",
	} {
		if !strings.Contains(r.startLine, want) {
			t.Errorf("make run's start line %q lacks %q", r.startLine, want)
		}
	}
	if r.binary != "bin/caddy" {
		t.Fatalf("make run runs %q, want bin/caddy (the binary under test stands for it)", r.binary)
	}

	// The Makefile's command from the repository's root, but with the binary
	// under test, the config file by its absolute path and ./data in a
	// temporary directory.
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{}, r.args...)
	for i := range args {
		if i > 0 && args[i-1] == "--config" {
			args[i] = filepath.Join(root, args[i])
		}
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o700); err != nil { // make run's `mkdir -p data`
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, testserver.Binary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+filepath.Join(dir, "xdg-data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "xdg-config"))
	cmd.Env = append(cmd.Env, r.env...)
	var log logBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cancel()
		<-exited
		if t.Failed() {
			t.Logf("make run's server log:\n%s", log.String())
		}
	})

	// It answers on 127.0.0.1: the site and the admin API.
	client := &http.Client{Timeout: 2 * time.Second}
	site := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitUntil(t, 20*time.Second, "make run's config answers on "+site, func() bool {
		select {
		case <-exited:
			t.Fatalf("make run's server exited:\n%s", log.String())
		default:
		}
		resp, err := client.Get(site + "/health/alive")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	for _, u := range []string{site + "/demo", site + "/portal", fmt.Sprintf("http://127.0.0.1:%d/config/", adminPort)} {
		resp, err := client.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 400 {
			t.Errorf("GET %s: %d, want it served", u, resp.StatusCode)
		}
	}

	// The app warned of dev mode, but not of a listener beyond loopback (that
	// warning would follow "palmgate started").
	waitUntil(t, 10*time.Second, "palmgate logs its start", func() bool { return strings.Contains(log.String(), "palmgate started") })
	if !strings.Contains(log.String(), "palmgate dev mode: palm scans can be simulated") {
		t.Errorf("make run's log lacks the dev mode warning (is the log captured?)")
	}
	if strings.Contains(log.String(), devExposedWarning) {
		t.Errorf("make run's config is loopback only, yet palmgate warned: %s", devExposedWarning)
	}

	// It does not answer on another address of this machine.
	t.Run("not on another local address", func(t *testing.T) {
		other := otherLocalAddresses()
		if len(other) == 0 {
			tooltest.Missing(t, "this machine has no network address besides loopback (net.Interfaces), so none can be "+
				"shown to refuse make run's port; the loopback checks above ran")
		}
		for _, ip := range other {
			// A listener on every interface is reachable at ip from here: if it
			// were not, a refusal would prove nothing.
			control, err := net.Listen("tcp", ":0")
			if err != nil {
				t.Fatal(err)
			}
			cport := control.Addr().(*net.TCPAddr).Port
			conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip.String(), strconv.Itoa(cport)), 2*time.Second)
			control.Close()
			if err != nil {
				t.Logf("%s is not reachable from here (%v): not a proof either way", ip, err)
				continue
			}
			conn.Close()
			addr := net.JoinHostPort(ip.String(), strconv.Itoa(port))
			conn, err = net.DialTimeout("tcp", addr, 2*time.Second)
			switch {
			case err == nil:
				conn.Close()
				t.Errorf("make run's site answers on %s: it must listen on loopback only", addr)
			case !errors.Is(err, syscall.ECONNREFUSED):
				t.Errorf("dialing %s: %v, want connection refused", addr, err)
			default:
				t.Logf("%s refuses make run's port, as it should", addr)
			}
			return
		}
		t.Fatalf("none of this machine's other addresses %v is reachable from here, so none can prove make run's binding", other)
	})
}

// otherLocalAddresses returns this machine's addresses that are not loopback
// (nor IPv6 link-local, which needs a zone to dial), of interfaces that are up.
func otherLocalAddresses() []net.IP {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var ips []net.IP
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := iface.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipnet, ok := a.(*net.IPNet)
			if !ok || ipnet.IP.IsLoopback() || ipnet.IP.IsLinkLocalUnicast() {
				continue
			}
			ips = append(ips, ipnet.IP)
		}
	}
	return ips
}

// TestDevModeWarnsBeyondLoopback: a dev mode palmgate whose site listens on every
// interface warns at start, naming the listener; one bound to loopback does not
// (issue 22, item 4).
func TestDevModeWarnsBeyondLoopback(t *testing.T) {
	t.Parallel()
	const site = "{\n\tadmin 127.0.0.1:{adminport}\n\tpersist_config off\n\tpalmgate {\n\t\tissuer http://127.0.0.1:{port}\n" +
		"\t\tstorage badger {datadir}/palmgate\n\t\tdev\n\t}\n}\n:{port} {\n%s\tpalmgate\n}\n"
	for _, tc := range []struct {
		name, bind string
		warns      bool
	}{
		{"every interface", "", true},
		{"loopback", "\tbind 127.0.0.1\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := start(t, testserver.Options{Caddyfile: fmt.Sprintf(site, tc.bind)})
			// The warning follows "palmgate started" in the app's Start, which may
			// end after the site first answers.
			waitUntil(t, 10*time.Second, "palmgate logs its start", func() bool { return strings.Contains(e.Log(), "palmgate started") })
			var warned []string
			for _, line := range strings.Split(e.Log(), "\n") {
				if strings.Contains(line, devExposedWarning) {
					warned = append(warned, line)
				}
			}
			switch {
			case !tc.warns && len(warned) > 0:
				t.Errorf("a loopback site warned: %q", warned)
			case tc.warns && (len(warned) != 1 || !strings.Contains(warned[0], `"level":"warn"`) ||
				!strings.Contains(warned[0], fmt.Sprintf(`"listen":":%d"`, e.Port)) || !strings.Contains(warned[0], "bind 127.0.0.1")):
				t.Errorf("warnings %q, want one WARN naming the listener :%d and how to bind to loopback", warned, e.Port)
			}
		})
	}
}

// Package testserver starts the real palmgate build of Caddy (cmd/caddy) with a
// Caddyfile on free local ports, for integration tests. A server that cannot be
// built or started FAILS the test: unlike Caddy's own caddytest helper, nothing
// here ever skips.
package testserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/tooltest"
)

// Timeouts of the harness.
const (
	startTimeout = 20 * time.Second // until the server answers, or until a failing one exits
	stopTimeout  = 10 * time.Second // after SIGINT, before SIGKILL
)

// Options configure a server. The zero value starts a dev-mode palmgate on a fresh
// data directory and free ports.
type Options struct {
	// Global holds extra lines for the `palmgate { }` global option block.
	Global string
	// Site holds the directives of the site block; default "palmgate".
	Site string
	// DataDir is the directory holding the Badger store (at DataDir/palmgate);
	// default a fresh t.TempDir(). Pass an old server's DataDir to reuse its data.
	DataDir string
	// Port is the HTTP port; 0 picks a free one.
	Port int
	// AdminPort is the admin API port; 0 picks a free one.
	AdminPort int
	// Storage replaces the storage line of the global block (default `storage
	// badger {DataDir}/palmgate`): `storage postgres <dsn>` puts several servers
	// on one database.
	Storage string
	// NoDev leaves `dev` out of the global block (then Global must configure a
	// palm_attestor, or provisioning fails).
	NoDev bool
	// Caddyfile, when set, is used verbatim instead of the generated one, after
	// substituting {port}, {adminport} and {datadir}.
	Caddyfile string
	// Env adds KEY=value entries to the server's environment.
	Env []string
	// Binary, when set, is the caddy binary to run instead of palmgate's
	// (Binary): the bench's own build of Caddy (bench/minimalcaddy).
	Binary string
}

// Server is a running caddy process.
type Server struct {
	// URL is the base URL of the site, and palmgate's issuer: http://127.0.0.1:<port>.
	URL string
	// AdminAddr is host:port of Caddy's admin API.
	AdminAddr string
	// DataDir holds the Badger store (at DataDir/palmgate).
	DataDir string
	// Port is the HTTP port.
	Port int
	// ConfigPath is the Caddyfile the server runs with.
	ConfigPath string

	opts    Options
	binary  string
	homeDir string
	log     *logFile

	mu   sync.Mutex
	proc *process // the current process; nil when stopped
}

// process is one run of the binary.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // exit error, valid after done
}

// Start writes a Caddyfile for opts, starts the binary and waits until the
// server answers GET /v1/human/leaderboard. It fails the test if the server
// exits or does not answer within 20 s. t.Cleanup stops it.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	var s *Server
	for attempt := 1; ; attempt++ {
		s = newServer(t, opts)
		err := s.tryStart()
		if err == nil {
			break
		}
		// A free port picked here may be taken by a parallel test before caddy
		// binds it: pick others.
		if attempt < 3 && opts.Port == 0 && opts.AdminPort == 0 && strings.Contains(s.Log(), "address already in use") {
			t.Logf("retrying on other ports: %v", err)
			continue
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		CheckLog(t, "server "+s.URL, s.Log(), s.Hosts()...) // leaks.go
		if t.Failed() {
			t.Logf("server log (%s):\n%s", s.URL, tail(s.Log(), 16<<10))
		}
	})
	return s
}

// StartExpectFailure runs the binary with the configuration of opts and returns
// its combined output once it has exited with a non-zero status. It fails the
// test if the server exits with status 0 or is still running after 20 s.
func StartExpectFailure(t testing.TB, opts Options) string {
	t.Helper()
	s := newServer(t, opts)
	p, err := s.spawn()
	if err != nil {
		t.Fatalf("starting %s: %v", s.binary, err)
	}
	select {
	case <-p.done:
	case <-time.After(startTimeout):
		p.kill()
		t.Fatalf("server with an invalid configuration is still running after %s; config:\n%s\nlog:\n%s",
			startTimeout, s.config(), tail(s.Log(), 16<<10))
	}
	if p.err == nil {
		t.Fatalf("server exited with status 0, want a failure; config:\n%s\nlog:\n%s", s.config(), tail(s.Log(), 16<<10))
	}
	return s.Log()
}

func newServer(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Port == 0 {
		opts.Port = FreePort(t)
	}
	if opts.AdminPort == 0 {
		opts.AdminPort = FreePort(t)
	}
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	if opts.Site == "" {
		opts.Site = "palmgate"
	}
	if opts.Binary == "" {
		opts.Binary = Binary(t)
	}
	dir := t.TempDir()
	s := &Server{
		URL:        "http://127.0.0.1:" + strconv.Itoa(opts.Port),
		AdminAddr:  "127.0.0.1:" + strconv.Itoa(opts.AdminPort),
		DataDir:    opts.DataDir,
		Port:       opts.Port,
		ConfigPath: filepath.Join(dir, "Caddyfile"),
		opts:       opts,
		binary:     opts.Binary,
		homeDir:    filepath.Join(dir, "home"),
	}
	var err error
	if s.log, err = openLog(filepath.Join(dir, "caddy.log")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.log.f.Close() })
	for _, d := range []string{s.homeDir, filepath.Join(s.homeDir, "data"), filepath.Join(s.homeDir, "config")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.writeConfig(); err != nil {
		t.Fatal(err)
	}
	return s
}

// config renders the Caddyfile of the current options.
func (s *Server) config() string {
	o := s.opts
	if o.Caddyfile != "" {
		return strings.NewReplacer(
			"{port}", strconv.Itoa(o.Port),
			"{adminport}", strconv.Itoa(o.AdminPort),
			"{datadir}", o.DataDir,
		).Replace(o.Caddyfile)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "{\n\tadmin %s\n\tpersist_config off\n\tpalmgate {\n", s.AdminAddr)
	fmt.Fprintf(&b, "\t\tissuer %s\n", s.URL)
	if o.Storage != "" {
		writeIndented(&b, o.Storage, "\t\t")
	} else {
		fmt.Fprintf(&b, "\t\tstorage badger %s\n", filepath.Join(o.DataDir, "palmgate"))
	}
	if !o.NoDev {
		b.WriteString("\t\tdev\n")
	}
	writeIndented(&b, o.Global, "\t\t")
	b.WriteString("\t}\n}\n")
	fmt.Fprintf(&b, "%s {\n", s.URL)
	writeIndented(&b, o.Site, "\t")
	b.WriteString("}\n")
	return b.String()
}

func writeIndented(b *strings.Builder, text, indent string) {
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			b.WriteString(indent + line + "\n")
		}
	}
}

func (s *Server) writeConfig() error {
	return os.WriteFile(s.ConfigPath, []byte(s.config()), 0o600)
}

// spawn starts the binary without waiting for it to answer.
func (s *Server) spawn() (*process, error) {
	cmd := exec.Command(s.binary, "run", "--config", s.ConfigPath, "--adapter", "caddyfile")
	cmd.Env = s.env()
	cmd.Stdout = s.log.f
	cmd.Stderr = s.log.f
	// If the test process dies abruptly, the server dies with it (Linux).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(s.log, "=== %s run (config %s)\n", time.Now().Format(time.RFC3339Nano), s.ConfigPath)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		fmt.Fprintf(s.log, "=== process exited: %v\n", p.err)
		close(p.done)
	}()
	return p, nil
}

func (s *Server) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "CADDY_ADMIN":
		default:
			env = append(env, kv)
		}
	}
	env = append(env,
		"HOME="+s.homeDir,
		"XDG_DATA_HOME="+filepath.Join(s.homeDir, "data"),
		"XDG_CONFIG_HOME="+filepath.Join(s.homeDir, "config"),
	)
	return append(env, s.opts.Env...)
}

// start spawns the process and waits until it answers.
func (s *Server) start(t testing.TB) {
	t.Helper()
	if err := s.tryStart(); err != nil {
		t.Fatal(err)
	}
}

// tryStart spawns the process and waits until it answers; the error carries
// the configuration and the log.
func (s *Server) tryStart() error {
	p, err := s.spawn()
	if err != nil {
		return fmt.Errorf("starting %s: %w", s.binary, err)
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-p.done:
			return fmt.Errorf("server exited before answering: %v\nconfig:\n%s\nlog:\n%s", p.err, s.config(), tail(s.Log(), 16<<10))
		default:
		}
		resp, err := client.Get(s.URL + "/v1/human/leaderboard")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			p.kill()
			return fmt.Errorf("server did not answer within %s: %v\nconfig:\n%s\nlog:\n%s", startTimeout, err, s.config(), tail(s.Log(), 16<<10))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops the server gracefully (SIGINT, then SIGKILL after 10 s) and waits
// for it to exit. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		fmt.Fprintf(s.log, "=== no exit %s after SIGINT: killing\n", stopTimeout)
		p.kill()
	}
}

// Kill stops the server with SIGKILL, as a crash would, and waits for it to exit.
func (s *Server) Kill() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

func (p *process) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Exited reports whether the current process has exited (or none is running).
func (s *Server) Exited() bool {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return true
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Restart stops the server (if it runs) and starts it again with the same
// configuration, data directory and ports.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	s.start(t)
}

// Reload rewrites the Caddyfile with newGlobal as the palmgate global block's
// extra lines and applies it with `caddy reload` through the admin API; it fails
// the test if the reload fails. (With Options.Caddyfile set, use ReloadCaddyfile.)
func (s *Server) Reload(t testing.TB, newGlobal string) {
	t.Helper()
	s.opts.Global = newGlobal
	s.reload(t)
}

// ReloadCaddyfile is Reload with a whole new Caddyfile (placeholders as in
// Options.Caddyfile).
func (s *Server) ReloadCaddyfile(t testing.TB, caddyfile string) {
	t.Helper()
	s.opts.Caddyfile = caddyfile
	s.reload(t)
}

func (s *Server) reload(t testing.TB) {
	t.Helper()
	if out, err := s.tryReload(t); err != nil {
		t.Fatalf("caddy reload: %v\noutput:\n%s\nconfig:\n%s\nserver log:\n%s", err, out, s.config(), tail(s.Log(), 16<<10))
	}
}

// TryReload is Reload for configurations expected to be refused: it returns the
// output and error of `caddy reload` instead of failing the test. A refused
// reload leaves the server running its previous configuration, while the
// Caddyfile on disk (and so a later Restart) has the new one.
func (s *Server) TryReload(t testing.TB, newGlobal string) (string, error) {
	t.Helper()
	s.opts.Global = newGlobal
	return s.tryReload(t)
}

func (s *Server) tryReload(t testing.TB) (string, error) {
	t.Helper()
	if err := s.writeConfig(); err != nil {
		t.Fatal(err)
	}
	out, err := s.RunCommand(t, "reload", "--config", s.ConfigPath, "--adapter", "caddyfile", "--address", s.AdminAddr)
	fmt.Fprintf(s.log, "=== reload (error %v):\n%s", err, out)
	// The previous configuration's server closes its idle keep-alive connections
	// as it shuts down, possibly after this returns: a POST the helpers send next
	// on one of them would fail with EOF (Go resends only idempotent requests).
	// Requests after a reload start on new connections.
	Client.CloseIdleConnections()
	return out, err
}

// RunCommand runs another subcommand of the binary (for example `reload` or a
// palmgate CLI command) with the server's environment, with a 60 s limit, and
// returns its combined output.
func (s *Server) RunCommand(t testing.TB, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.binary, args...)
	cmd.Env = s.env()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Config returns the Caddyfile text the server runs with.
func (s *Server) Config() string { return s.config() }

// Log returns everything the server processes have written so far.
func (s *Server) Log() string { return s.log.String() }

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago and that
// this process has not handed out before. The kernel may hand a port it just
// freed to the next caller, and Caddy binds with SO_REUSEPORT, so two servers
// of parallel tests could otherwise share a port without an error, each getting
// part of the other's requests.
func FreePort(t testing.TB) int {
	t.Helper()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("finding a free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		handedOut.Lock()
		seen := handedOut.ports[port]
		handedOut.ports[port] = true
		handedOut.Unlock()
		if !seen {
			return port
		}
	}
}

// handedOut is every port FreePort has returned in this process.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

var build struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

// Binary returns the path of the caddy binary under test: $PALMGATE_CADDY if set,
// else one built per test process with `go build ./cmd/caddy` from the module root.
// A failed build fails the test.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("PALMGATE_CADDY"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("PALMGATE_CADDY: %v", err)
		}
		return p
	}
	build.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			build.err = err
			return
		}
		build.dir, err = os.MkdirTemp("", "palmgate-caddy-")
		if err != nil {
			build.err = err
			return
		}
		build.path = filepath.Join(build.dir, "caddy")
		cmd := exec.Command("go", "build", "-o", build.path, "./cmd/caddy")
		cmd.Dir = root
		build.out, build.err = cmd.CombinedOutput()
	})
	if build.err != nil {
		t.Fatalf("building the caddy binary (go build ./cmd/caddy): %v\n%s", build.err, build.out)
	}
	return build.path
}

// Main runs the tests of a package, then the cleanups after (a failed one fails
// the run), and removes the binary Binary built. Use it from TestMain:
// `func TestMain(m *testing.M) { testserver.Main(m) }`.
func Main(m *testing.M, after ...func() error) {
	code := m.Run()
	if report, leaked := leakReport(); leaked { // leaks.go
		fmt.Fprintln(os.Stderr, report)
		code = 1
	}
	for _, f := range after {
		if err := f(); err != nil && code == 0 {
			code = 1
		}
	}
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	tooltest.Cleanup() // the relying parties built from integration/rp
	os.Exit(code)
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("go env GOMOD: not inside a module")
	}
	return filepath.Dir(gomod), nil
}

// logFile is a server's log: a file the caddy process writes to itself (its
// stdout and stderr), so that no pipe, and no goroutine copying it, costs the
// test process CPU for each line (the load scripts share the cores with
// caddy); the harness appends its own lines to it.
type logFile struct{ f *os.File }

func openLog(path string) (*logFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	return &logFile{f: f}, err
}

func (l *logFile) Write(p []byte) (int, error) { return l.f.Write(p) }

// String is the log so far, read through the open file (no new descriptor, so
// a busy test process cannot fail to open it). A failed read says so in the
// text, rather than passing for an empty log.
func (l *logFile) String() string {
	st, err := l.f.Stat()
	if err != nil {
		return fmt.Sprintf("=== reading the log %s: %v\n", l.f.Name(), err)
	}
	b := make([]byte, st.Size())
	n, err := l.f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Sprintf("%s\n=== reading the log %s: %v\n", b[:n], l.f.Name(), err)
	}
	return string(b[:n])
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "...\n" + s[len(s)-n:]
}

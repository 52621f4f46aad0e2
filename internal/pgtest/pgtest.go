// Package pgtest gives tests a real PostgreSQL database.
//
// DSN returns the connection string of a fresh, empty database, created for the calling
// test and dropped after it. The databases live on the server named by the environment
// variable PALMGATE_TEST_POSTGRES (a DSN whose user may CREATE DATABASE) when it is set;
// otherwise on a private throwaway cluster that the test binary starts on first use
// (initdb in a temporary directory, a server listening only on a Unix socket there) and
// that Main stops and removes after the tests. NewCluster starts a further private
// cluster that one test owns and may stop and restart.
//
// PostgreSQL refuses to run as root: a test binary running as root runs initdb and the
// server as the "postgres" user, owner of the temporary directory; any other user runs
// them as itself. When neither server is possible (initdb and postgres are on neither
// PATH nor /usr/lib/postgresql/*/bin, or the test runs as root and there is no
// "postgres" user), the tests that ask for a database skip with one message saying
// why, or fail with it when PALMGATE_REQUIRE_POSTGRES=1 (meant for CI), so that a
// green run cannot hide tests that never ran. A server that is there but fails to
// start always fails the test.
//
// The private clusters run with fsync=off and full_page_writes=off, for speed: they
// only lose data when the machine itself crashes, which no test does. Tests that
// reopen a store, or stop and restart a cluster (a clean, fast shutdown), still see
// every committed write, because the server still writes its WAL before a commit
// returns (synchronous_commit stays on) and writes all data out at shutdown.
// NewClusterWith with ClusterOptions.Durable starts a cluster with fsync and
// full_page_writes on instead, as a production server runs, for benchmarks.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// EnvDSN names the environment variable holding the DSN of a server to create the
	// test databases on, instead of starting a private cluster.
	EnvDSN = "PALMGATE_TEST_POSTGRES"
	// EnvRequire names the environment variable that, set to 1, turns a skip for want
	// of PostgreSQL into a failure.
	EnvRequire = "PALMGATE_REQUIRE_POSTGRES"

	// startTimeout bounds how long a private cluster may take to accept connections.
	startTimeout = 30 * time.Second
	// stopTimeout bounds a fast shutdown before the server is killed.
	stopTimeout = 15 * time.Second
	// port is the port number of every private cluster. They listen on no TCP port;
	// it only names the socket file in each cluster's own directory.
	port = 5432
)

var shared struct {
	once    sync.Once
	cluster *Cluster // nil when PALMGATE_TEST_POSTGRES is set or start failed
	admin   string   // DSN of the server's maintenance database
	skip    string   // why there is no server, or ""
	err     error    // why the private cluster failed to start, or nil
}

// Main runs the tests of a package and then stops and removes the shared private
// cluster, if one was started. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if err := Cleanup(); err != nil && code == 0 {
		code = 1
	}
	os.Exit(code)
}

// Cleanup stops and removes the shared private cluster, if one was started, for a
// TestMain that cannot call Main (say, one that calls testserver.Main).
func Cleanup() error {
	if c := shared.cluster; c != nil {
		if err := c.remove(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: removing the private PostgreSQL cluster: %v\n", err)
			return err
		}
	}
	return nil
}

// DSN returns the DSN of a new, empty database for t, dropped when t ends (after the
// cleanups t registers later, such as closing a store that uses it). It skips t, or
// fails it when PALMGATE_REQUIRE_POSTGRES=1, when no server can be had.
func DSN(t testing.TB) string {
	t.Helper()
	shared.once.Do(func() {
		if dsn := os.Getenv(EnvDSN); dsn != "" {
			shared.admin = dsn
			return
		}
		if shared.skip = Unavailable(); shared.skip != "" {
			return
		}
		shared.cluster, shared.err = startCluster()
		if shared.err == nil {
			shared.admin = shared.cluster.AdminDSN()
		}
	})
	switch {
	case shared.skip != "":
		skipOrFail(t, shared.skip)
	case shared.err != nil:
		t.Fatalf("pgtest: starting a private PostgreSQL cluster: %v", shared.err)
	}
	return createDatabase(t, shared.admin)
}

// Unavailable says why this process cannot start a private cluster, or returns "".
func Unavailable() string {
	if _, err := binary("initdb"); err != nil {
		return fmt.Sprintf("no PostgreSQL to test with: initdb not found on PATH or under /usr/lib/postgresql "+
			"(install PostgreSQL, or set %s to the DSN of a server)", EnvDSN)
	}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			return fmt.Sprintf("no PostgreSQL to test with: running as root, and there is no \"postgres\" user "+
				"to run the server as (PostgreSQL refuses to run as root); add one, or set %s", EnvDSN)
		}
	}
	return ""
}

// skipOrFail skips t with why, or fails it when PALMGATE_REQUIRE_POSTGRES=1.
func skipOrFail(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("pgtest: %s (%s=1 makes this a failure)", why, EnvRequire)
	}
	t.Skipf("pgtest: %s", why)
}

// createDatabase creates a database with a random name on the server of admin and
// returns its DSN; a cleanup drops it.
func createDatabase(t testing.TB, admin string) string {
	t.Helper()
	name := "palmgate_test_" + randomHex(6)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := adminExec(ctx, admin, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := adminExec(ctx, admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("pgtest: dropping database %s: %v", name, err)
		}
	})
	dsn, err := WithDatabase(admin, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// adminExec runs one statement on its own connection to the server of dsn.
func adminExec(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// WithDatabase returns dsn (a URL or keyword/value DSN) naming database name instead.
func WithDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parsing %s as a URL: %w", EnvDSN, err)
		}
		u.Path = "/" + name
		return u.String(), nil
	}
	// In keyword/value form a later keyword overrides an earlier one.
	return dsn + " dbname=" + name, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// installDirs matches the directories where Debian installs PostgreSQL's programs.
var installDirs = "/usr/lib/postgresql/*/bin"

// binary finds a PostgreSQL program on PATH or in the newest of installDirs.
func binary(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	dirs, _ := filepath.Glob(installDirs)
	for i := len(dirs) - 1; i >= 0; i-- {
		p := filepath.Join(dirs[i], name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

// Cluster is a private PostgreSQL cluster in a temporary directory, listening only on
// a Unix socket in that directory, with trust authentication for user postgres.
type Cluster struct {
	dir  string              // the temporary directory: data/, server.log, the socket
	cred *syscall.Credential // the postgres user's, when running as root; else nil
	opts ClusterOptions

	mu     sync.Mutex
	server *exec.Cmd     // the running postmaster, or nil
	exited chan struct{} // closed when server has exited
}

// NewCluster starts a private cluster that only t uses, removed when t ends. It skips
// t (or fails it, see DSN) when no cluster can be started here.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	if why := Unavailable(); why != "" {
		skipOrFail(t, why)
	}
	c, err := startCluster()
	if err != nil {
		t.Fatalf("pgtest: starting a private PostgreSQL cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.remove(); err != nil {
			t.Errorf("pgtest: removing cluster: %v", err)
		}
	})
	return c
}

// ClusterOptions configure a cluster of NewClusterWith. The zero value is the
// cluster of NewCluster.
type ClusterOptions struct {
	// Durable runs the server as a production one would, for benchmarks: fsync,
	// full_page_writes and synchronous_commit on (PostgreSQL's defaults), and
	// initdb syncs the new cluster to disk. Without it the cluster runs with
	// fsync=off and full_page_writes=off (see the package documentation).
	Durable bool
	// Settings are further server settings, "name=value" each, passed as -c
	// options after pgtest's own (so they override them): "shared_buffers=128MB",
	// "shared_preload_libraries=pg_stat_statements".
	Settings []string
}

// NewClusterWith is NewCluster with options: a private cluster that only t
// uses, removed when t ends.
func NewClusterWith(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	if why := Unavailable(); why != "" {
		skipOrFail(t, why)
	}
	c, err := startClusterWith(opts)
	if err != nil {
		t.Fatalf("pgtest: starting a private PostgreSQL cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.remove(); err != nil {
			t.Errorf("pgtest: removing cluster: %v", err)
		}
	})
	return c
}

// PID returns the process id of the running server (the postmaster, parent of
// every backend and auxiliary process of the cluster), or 0 when it is stopped.
func (c *Cluster) PID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.server == nil || c.server.Process == nil {
		return 0
	}
	return c.server.Process.Pid
}

// AdminDSN is the DSN of the cluster's postgres database, as superuser postgres.
func (c *Cluster) AdminDSN() string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres sslmode=disable", c.dir, port)
}

// DSN returns the DSN of a new, empty database on c for t, dropped when t ends.
func (c *Cluster) DSN(t testing.TB) string {
	t.Helper()
	return createDatabase(t, c.AdminDSN())
}

// startCluster runs initdb in a new temporary directory and starts the server.
func startCluster() (*Cluster, error) { return startClusterWith(ClusterOptions{}) }

// startClusterWith is startCluster with options.
func startClusterWith(opts ClusterOptions) (*Cluster, error) {
	initdb, err := binary("initdb")
	if err != nil {
		return nil, err
	}
	removeAbandoned()
	dir, err := os.MkdirTemp("", tempPattern)
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, opts: opts}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root: run it as postgres, owning the directory.
		if c.cred, err = postgresCredential(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		if err := os.Chown(dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	// trust: only the socket's directory, owned by the server's user (and root),
	// reaches it. --no-sync: a throwaway cluster need not be on disk before it starts.
	args := []string{"-D", c.dataDir(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-instructions"}
	if !opts.Durable {
		args = append(args, "--no-sync")
	}
	out, err := c.command(initdb, args...).CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	if err := c.Start(); err != nil {
		c.remove()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) dataDir() string { return filepath.Join(c.dir, "data") }

// tempPattern names the clusters' temporary directories.
const tempPattern = "palmgate-pg-"

// removeAbandoned removes the directories of clusters whose test binary was killed
// (its server then stopped too, see Start): those untouched for an hour whose
// server is not running.
func removeAbandoned() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPattern+"*"))
	for _, dir := range dirs {
		info, err := os.Stat(dir)
		if err != nil || time.Since(info.ModTime()) < time.Hour {
			continue
		}
		if pid, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid")); err == nil {
			first, _, _ := strings.Cut(string(pid), "\n")
			if n, err := strconv.Atoi(first); err == nil {
				if err := syscall.Kill(n, 0); err == nil || errors.Is(err, syscall.EPERM) {
					continue // still running
				}
			}
		}
		os.RemoveAll(dir)
	}
}

// command builds a command that runs as the cluster's user, in its directory.
func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	return cmd
}

func postgresCredential() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, err
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// Start starts the cluster's server (again) and waits until it accepts connections.
func (c *Cluster) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.server != nil {
		return errors.New("pgtest: cluster already running")
	}
	postgres, err := binary("postgres")
	if err != nil {
		return err
	}
	logFile, err := os.OpenFile(filepath.Join(c.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	args := []string{"-D", c.dataDir(),
		"-c", "listen_addresses=",
		"-c", "unix_socket_directories=" + c.dir,
		"-c", "port=" + strconv.Itoa(port),
		"-c", "fsync=off",
		"-c", "full_page_writes=off",
		"-c", "shared_buffers=16MB",
		"-c", "max_connections=100",
		"-c", "logging_collector=off",
	}
	if c.opts.Durable {
		args = append(args, "-c", "fsync=on", "-c", "full_page_writes=on", "-c", "synchronous_commit=on")
	}
	for _, setting := range c.opts.Settings {
		args = append(args, "-c", setting)
	}
	cmd := c.command(postgres, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Should the test binary die without stopping the server, the server shuts down
	// at once (SIGQUIT) instead of outliving it (checked by hand with kill -9). Go
	// sets this after switching users, which would otherwise clear it.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	c.server, c.exited = cmd, exited

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, c.AdminDSN())
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		select {
		case <-exited:
			c.server = nil
			return fmt.Errorf("postgres exited during startup: %v\n%s", cmd.ProcessState, c.log())
		case <-ctx.Done():
			c.stopLocked()
			return fmt.Errorf("postgres not accepting connections after %v: %v\n%s", startTimeout, err, c.log())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop shuts the server down (a fast shutdown: open connections are closed and their
// transactions rolled back) and waits for it to exit. Committed data stays.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopLocked()
}

func (c *Cluster) stopLocked() error {
	if c.server == nil {
		return nil
	}
	defer func() { c.server = nil }()
	if err := c.server.Process.Signal(syscall.SIGINT); err != nil {
		return fmt.Errorf("stopping postgres: %w", err)
	}
	select {
	case <-c.exited:
		return nil
	case <-time.After(stopTimeout):
	}
	c.server.Process.Kill()
	<-c.exited
	return fmt.Errorf("postgres did not stop within %v; killed it\n%s", stopTimeout, c.log())
}

// remove stops the server and deletes the cluster's directory.
func (c *Cluster) remove() error {
	err := c.Stop()
	return errors.Join(err, os.RemoveAll(c.dir))
}

// log returns the end of the server's log, for error messages.
func (c *Cluster) log() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

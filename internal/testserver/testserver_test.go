package testserver

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

// fakeTB records failures and skips instead of reporting them, so that the
// harness's own failures can be tested. Fatal and Skip end the goroutine, as
// the real ones do.
type fakeTB struct {
	testing.TB // the real test, for TempDir, Logf and Name
	mu         sync.Mutex
	failed     bool
	skipped    bool
	msgs       []string
	cleanups   []func()
}

func (f *fakeTB) record(failed, skipped bool, msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = f.failed || failed
	f.skipped = f.skipped || skipped
	f.msgs = append(f.msgs, msg)
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Errorf(format string, args ...any) {
	f.record(true, false, fmt.Sprintf(format, args...))
}
func (f *fakeTB) Error(args ...any) { f.record(true, false, fmt.Sprint(args...)) }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.record(true, false, fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (f *fakeTB) Fatal(args ...any) { f.record(true, false, fmt.Sprint(args...)); runtime.Goexit() }
func (f *fakeTB) FailNow()          { f.record(true, false, "FailNow"); runtime.Goexit() }
func (f *fakeTB) Fail()             { f.record(true, false, "Fail") }
func (f *fakeTB) Skipf(format string, args ...any) {
	f.record(false, true, fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (f *fakeTB) Skip(args ...any) { f.record(false, true, fmt.Sprint(args...)); runtime.Goexit() }
func (f *fakeTB) SkipNow()         { f.record(false, true, "SkipNow"); runtime.Goexit() }
func (f *fakeTB) Failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}
func (f *fakeTB) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}

// runFake runs body with a fakeTB in its own goroutine, then its cleanups.
func runFake(t *testing.T, body func(tb testing.TB)) *fakeTB {
	f := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		body(f)
	}()
	<-done
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
	return f
}

// plain is a Caddyfile without palmgate: the harness works with any config.
func plain(body string) string {
	return "{\n\tadmin 127.0.0.1:{adminport}\n\tpersist_config off\n}\n" +
		"http://127.0.0.1:{port} {\n\trespond \"" + body + "\"\n}\n"
}

func TestStartFailsOnBadConfig(t *testing.T) {
	f := runFake(t, func(tb testing.TB) {
		Start(tb, Options{Caddyfile: plain("x") + "\nthis is { not valid\n"})
		tb.Errorf("Start returned for a server that cannot start")
	})
	if !f.failed || f.skipped {
		t.Fatalf("Start with an invalid Caddyfile: failed=%v skipped=%v, want a failure: %q", f.failed, f.skipped, f.msgs)
	}
	if msg := strings.Join(f.msgs, "\n"); !strings.Contains(msg, "exited before answering") {
		t.Errorf("failure message lacks the reason and log:\n%s", msg)
	}
}

func TestStartFailsWithoutBinary(t *testing.T) {
	t.Setenv("PALMGATE_CADDY", "/nonexistent/caddy")
	f := runFake(t, func(tb testing.TB) { Start(tb, Options{}) })
	if !f.failed || f.skipped {
		t.Fatalf("Start without a binary: failed=%v skipped=%v, want a failure", f.failed, f.skipped)
	}
}

func TestStartExpectFailureReturnsOutput(t *testing.T) {
	out := StartExpectFailure(t, Options{Caddyfile: plain("x") + "\nfrobnicate {\n"})
	if !strings.Contains(out, "frobnicate") && !strings.Contains(out, "Caddyfile") {
		t.Errorf("output does not explain the failure:\n%s", out)
	}
}

// TestLifecycle drives Start, Stop, Restart, Kill and Reload against a plain
// Caddy site, independent of palmgate.
func TestLifecycle(t *testing.T) {
	s := Start(t, Options{Caddyfile: plain("one")})
	get := func() string {
		resp := Do(t, "GET", s.URL+"/", nil)
		resp.ExpectStatus(t, http.StatusOK)
		return string(resp.Body)
	}
	if got := get(); got != "one" {
		t.Fatalf("GET / = %q, want one", got)
	}
	s.ReloadCaddyfile(t, plain("two"))
	if got := get(); got != "two" {
		t.Fatalf("after reload GET / = %q, want two", got)
	}
	if _, err := os.Stat(s.ConfigPath); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if !s.Exited() {
		t.Fatal("Kill: process still running")
	}
	s.Restart(t)
	if got := get(); got != "two" {
		t.Fatalf("after restart GET / = %q, want two", got)
	}
	s.Stop()
	if !s.Exited() {
		t.Fatal("Stop: process still running")
	}
	if _, err := http.Get(s.URL + "/"); err == nil {
		t.Fatal("server still answers after Stop")
	}
	if !strings.Contains(s.Log(), "=== process exited") {
		t.Errorf("log lacks the exits:\n%s", s.Log())
	}
}

// TestFreePortNeverRepeats: parallel tests asking for ports at once never get the
// same one, even though the kernel may hand a just-freed port out again.
func TestFreePortNeverRepeats(t *testing.T) {
	const n = 300
	ports := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { ports <- FreePort(t) })
	}
	wg.Wait()
	close(ports)
	seen := map[int]bool{}
	for p := range ports {
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}

// TestLogFileSaysWhenUnreadable: the log reads back what was written, and a log
// that cannot be read says so instead of passing for an empty one.
func TestLogFileSaysWhenUnreadable(t *testing.T) {
	l, err := openLog(filepath.Join(t.TempDir(), "caddy.log"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Write([]byte("line one\n")); err != nil {
		t.Fatal(err)
	}
	if got := l.String(); got != "line one\n" {
		t.Errorf("String() = %q, want the line written", got)
	}
	l.f.Close()
	if got := l.String(); !strings.Contains(got, "=== reading the log") {
		t.Errorf("String() of a closed log = %q, want it to say the read failed", got)
	}
}

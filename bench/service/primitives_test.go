package service

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/palmgate/palmgate/bench/exchangesig"
	"github.com/palmgate/palmgate/bench/minimal"
	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/badgerstore"
)

// startMinimal serves the minimal server (bench/minimal) in this process on a free port.
func startMinimal(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: minimal.Handler()}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// minimalProcessEnv makes TestMinimalServerProcess serve, writing its address to
// the file the variable names.
const minimalProcessEnv = "PALMGATE_BENCH_MINIMAL_ADDR_FILE"

// TestMinimalServerProcess is not a test: run by startMinimalProcess with
// minimalProcessEnv set, it serves the minimal server in a process of its own (as
// Caddy runs in its own) until its stdin closes.
func TestMinimalServerProcess(t *testing.T) {
	file := os.Getenv(minimalProcessEnv)
	if file == "" {
		t.Skip("the minimal server's own process (started by the load script)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: minimal.Handler()}
	go srv.Serve(l)
	if err := os.WriteFile(file, []byte(l.Addr().String()), 0o600); err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, os.Stdin) // until the parent closes it (or dies)
	srv.Close()
}

// startMinimalProcess runs the minimal server in a child process (this test
// binary) and returns its address and pid.
func startMinimalProcess(t testing.TB) (string, int) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "addr")
	cmd := exec.Command(os.Args[0], "-test.run=^TestMinimalServerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), minimalProcessEnv+"="+file)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(file); err == nil && len(b) > 0 {
			return string(b), cmd.Process.Pid
		}
	}
	t.Fatalf("the minimal server process did not start:\n%s", out.String())
	return "", 0
}

// verifyOp is one raw ed25519.Verify of a prepared signature: the floor of
// verify/signature's cost.
func verifyOp(t testing.TB) func() error {
	t.Helper()
	key := AgentKey(1)
	pub := key.Public().(ed25519.PublicKey)
	msg := []byte("bench verify 0 0 at 1767225600000")
	sig := ed25519.Sign(key, msg)
	return func() error {
		if !ed25519.Verify(pub, msg, sig) {
			return fmt.Errorf("ed25519.Verify refused a good signature")
		}
		return nil
	}
}

// signer signs what one code exchange signs (bench/exchangesig): an ES256
// access token, an ID token (ES256 for the bench client, its
// id_token_signed_response_alg; RS256 for the bench-rs client, the default)
// and an ES256 refresh token.
type signer struct{ *exchangesig.Signer }

func newSigner(t testing.TB) *signer {
	t.Helper()
	store, err := badgerstore.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	s, err := exchangesig.New(context.Background(), store, "http://127.0.0.1:41234/oauth2")
	if err != nil {
		t.Fatal(err)
	}
	return &signer{s}
}

// sign3 makes the three tokens of one exchange of the bench client (an ES256 ID
// token).
func (s *signer) sign3() error { _, err := s.Sign3(keys.ES256, clientID); return err }

// sign3RS makes the three tokens of one exchange of the RS256 client.
func (s *signer) sign3RS() error { _, err := s.Sign3(keys.RS256, clientIDRS); return err }

// badgerCommits returns one small synced commit on a Badger database of its own,
// on the same file system as the server's store: Badger's own synced-commit rate
// (badger.Open with SyncWrites and DB.Update), the baseline of the registration
// goal. Each commit syncs Badger's log, whatever the concurrency.
func badgerCommits(t testing.TB) func() error {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(t.TempDir(), "badger")).WithSyncWrites(true).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return freshKeyCommits(func(key, value []byte) error {
		return db.Update(func(txn *badger.Txn) error { return txn.Set(key, value) })
	})
}

// storeCommits is the same commit through storage/badgerstore, which commits
// concurrent Updates together (one sync for a group of them).
func storeCommits(t testing.TB) func() error {
	t.Helper()
	store, err := badgerstore.Open(filepath.Join(t.TempDir(), "store"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return freshKeyCommits(func(key, value []byte) error {
		return store.Update(context.Background(), func(tx storage.Txn) error { return tx.Set(key, value, 0) })
	})
}

// freshKeyCommits returns an op that commits one 64-byte value under a new key.
func freshKeyCommits(commit func(key, value []byte) error) func() error {
	value := bytes.Repeat([]byte("v"), 64)
	var seq atomic.Uint64
	return func() error { return commit(fmt.Appendf(nil, "bench/%016x", seq.Add(1)), value) }
}

// TestMinimalServer: the baseline answers as palmgate does (minimal.Check),
// verified true for a good signature and false for another message, 400 for a
// body it cannot read.
func TestMinimalServer(t *testing.T) {
	h := minimal.Handler()
	err := minimal.Check(func(body []byte) (int, http.Header, []byte, error) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", minimal.VerifyPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Header(), rec.Body.Bytes(), nil
	})
	if err != nil {
		t.Error(err)
	}
}

package integration

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/internal/testserver"
)

// restoreTo is where a backup test restores to: the --storage arguments of
// `caddy palmgate restore`, the storage line of the server started on it, and how
// many records it holds (0 when it does not exist).
type restoreTo struct {
	args    []string
	storage string
	records func(t *testing.T) int
	// keyed makes the backup with --key-file (restored with it).
	keyed bool
}

// TestBackupRestoreBadger: a backup of a running Badger instance under load, made
// with a key, restored into a new Badger directory, serves the same data.
func TestBackupRestoreBadger(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "restored")
	backupRestore(t, "", restoreTo{
		args:    []string{"badger", dir},
		storage: fmt.Sprintf("storage badger %q", dir),
		records: func(t *testing.T) int { return badgerRecords(t, dir) },
		keyed:   true,
	})
}

// TestBackupRestorePostgres: the same from a PostgreSQL instance into another
// PostgreSQL database, the target's DSN given as a placeholder.
func TestBackupRestorePostgres(t *testing.T) {
	t.Parallel()
	var src, dst string
	if os.Getenv(pgtest.EnvDSN) != "" {
		src, dst = pgtest.DSN(t), pgtest.DSN(t)
	} else {
		c := pgtest.NewCluster(t)
		src, dst = c.DSN(t), c.DSN(t)
	}
	backupRestore(t, fmt.Sprintf("storage postgres %q", src), restoreTo{
		args:    []string{"postgres", "{env.PALMGATE_RESTORE_DSN}"},
		storage: fmt.Sprintf("storage postgres %q", dst),
		records: func(t *testing.T) int { return kvRows(t, dst) },
	}, "PALMGATE_RESTORE_DSN="+dst)
}

// backupRestore runs a palmgate on srcStorage ("" for its own Badger store), gives
// it agents, a dynamic client and logins, takes `caddy palmgate backup` while a
// goroutine registers agents and logs in, stops it (and wipes its Badger store), refuses to
// restore a truncated and an altered copy of the backup (the target stays empty),
// restores the backup into to and starts a palmgate there on the same issuer URL:
// the same agents and leaderboard (consistent with the agents of the snapshot),
// clients, signing keys (a token issued before the backup verifies), refresh
// tokens and pairwise subjects.
func backupRestore(t *testing.T, srcStorage string, to restoreTo, env ...string) {
	shop := newOIDCClient("shop", "")
	opts := oidcOptions([]oidcClient{shop}, "palmgate")
	opts.Storage = srcStorage
	opts.Env = env
	e := start(t, opts)

	dyn, _ := e.adminCreate(t, map[string]any{"name": "Ops App", "redirect_uris": []string{"https://ops.example/cb"}})
	alice, bob := e.subject("alice"), e.subject("bob")
	var agents []*agent
	for i, who := range []string{alice, bob, alice} {
		a := newAgent(t, fmt.Sprint("backed-up-", i))
		e.register(t, a, who)
		agents = append(agents, a)
	}
	aliceShop := e.tokensFor(t, shop, alice, "openid offline_access")
	bobDyn := e.tokensFor(t, dyn, bob, "openid")
	kids := e.jwksKids(t)
	before := e.snapshot(t, agents, nil)

	t.Log("load: a goroutine registers agents and logs in while the backup runs")
	var (
		mu      sync.Mutex
		loaded  []*agent // registered (answered) agents of the load
		stop    = make(chan struct{})
		stopped = make(chan struct{})
	)
	loaders := []string{e.subject("load-a"), e.subject("load-b")}
	go func() {
		defer close(stopped)
		for i := range 200 { // bounded
			select {
			case <-stop:
				return
			default:
			}
			a := newAgent(t, fmt.Sprint("load-", i))
			e.register(t, a, loaders[i%2])
			mu.Lock()
			loaded = append(loaded, a)
			mu.Unlock()
			e.tokensFor(t, shop, loaders[i%2], "openid")
		}
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(loaded) }
	waitUntil(t, time.Minute, "the load registers agents", func() bool { return count() >= 2 })
	settled := count() // registered before the backup began: in it for sure

	file := filepath.Join(t.TempDir(), "palmgate.backup")
	var keyArgs []string
	if to.keyed {
		keyFile := filepath.Join(t.TempDir(), "backup.key")
		if err := os.WriteFile(keyFile, []byte(randHex(32)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		keyArgs = []string{"--key-file", keyFile}
	}
	out, err := e.RunCommand(t, append([]string{"palmgate", "backup", "--to", file, "--address", e.AdminAddr, "--json"}, keyArgs...)...)
	close(stop)
	<-stopped
	if err != nil {
		t.Fatalf("caddy palmgate backup: %v\n%s", err, out)
	}
	t.Logf("backup: %s; the load registered %d agents, %d before the backup began", strings.TrimSpace(out), count(), settled)
	if !strings.Contains(out, `"records":`) || !strings.Contains(out, `"checksum":`) || to.keyed != strings.Contains(out, `"mac":"hmac-sha256"`) {
		t.Errorf("backup --json printed %s", out)
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the backup file: %v, mode %v, want 0600", err, st.Mode().Perm())
	}
	if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(file), ".*partial")); len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
	testserver.Do(t, "POST", "http://"+e.AdminAddr+"/palmgate/backup", nil, "Origin", "http://"+e.AdminAddr).
		ExpectStatus(t, http.StatusMethodNotAllowed)

	t.Log("the instance is stopped; its Badger store is wiped (a PostgreSQL one is restored into another database)")
	e.Stop()
	if srcStorage == "" {
		if err := os.RemoveAll(filepath.Join(e.DataDir, "palmgate")); err != nil {
			t.Fatal(err)
		}
	}

	restore := func(from string) (string, error) {
		args := append(append([]string{"palmgate", "restore", "--from", from}, keyArgs...), "--storage")
		return e.RunCommand(t, append(args, to.args...)...)
	}
	if to.keyed {
		args := append([]string{"palmgate", "restore", "--from", file, "--storage"}, to.args...)
		out, err := e.RunCommand(t, args...)
		if err == nil || !strings.Contains(out, "give the key") {
			t.Errorf("restoring a backup made with a key, without it: %v, want a refusal:\n%s", err, out)
		}
		if n := to.records(t); n != 0 {
			t.Fatalf("the refused restore left %d records in the target", n)
		}
	}
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ name, want string }{
		{"truncated", "truncated"},
		{"altered", "does not match"},
		{"newer", "format version 2, newer than this palmgate reads backup format version 1"},
	} {
		damaged := slices.Clone(good)
		switch bad.name {
		case "truncated":
			damaged = damaged[:len(damaged)*2/3]
		case "altered":
			damaged[len(damaged)-1] ^= 0x01 // in the checksum (storage's tests alter every byte)
		case "newer": // refused on the version alone, before the checksum is read
			binary.BigEndian.PutUint32(damaged[16:20], 2)
		}
		path := filepath.Join(t.TempDir(), bad.name+".backup")
		if err := os.WriteFile(path, damaged, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := restore(path)
		if err == nil || !strings.Contains(out, "refusing to restore") || !strings.Contains(out, bad.want) || !strings.Contains(out, "nothing was written") ||
			strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Errorf("restoring a %s backup: %v, want a refusal saying %q:\n%s", bad.name, err, bad.want, out)
		}
		if n := to.records(t); n != 0 {
			t.Fatalf("the refused restore of a %s backup left %d records in the target", bad.name, n)
		}
	}

	out, err = restore(file)
	if err != nil {
		t.Fatalf("caddy palmgate restore: %v\n%s", err, out)
	}
	t.Logf("restore: %s", strings.TrimSpace(out))
	if to.records(t) == 0 {
		t.Fatal("the restore wrote nothing")
	}
	out, err = restore(file)
	if err == nil || !strings.Contains(out, "already holds palmgate records") {
		t.Errorf("a second restore into the same store: %v, want a refusal:\n%s", err, out)
	}

	t.Log("a palmgate on the restored store, on the same issuer URL")
	ropts := oidcOptions([]oidcClient{shop}, "palmgate")
	ropts.Port = e.Port
	ropts.Storage = to.storage
	r := start(t, ropts)
	after := r.snapshot(t, agents, nil)
	if fmt.Sprint(after.devices, after.keys) != fmt.Sprint(before.devices, before.keys) {
		t.Errorf("agents after the restore differ:\n  before %+v %+v\n  after  %+v %+v", before.devices, before.keys, after.devices, after.keys)
	}
	mu.Lock()
	inBackup := 0
	for i, a := range loaded {
		registered := r.lookupDevice(t, a.deviceID).Registered
		if i < settled && !registered {
			t.Errorf("agent %s, registered before the backup began, is not in the restored store", a.deviceID)
		}
		if registered {
			inBackup++
		}
	}
	mu.Unlock()
	if got, want := totalAgents(after.board), len(agents)+inBackup; got != want {
		t.Errorf("the restored leaderboard counts %d agents, the restored registry holds %d: not one snapshot", got, want)
	}
	for _, h := range before.board {
		if !slices.ContainsFunc(after.board, func(x entry) bool { return fmt.Sprint(x) == fmt.Sprint(h) }) {
			t.Errorf("leaderboard entry %+v is missing after the restore: %+v", h, after.board)
		}
	}
	if got := r.jwksKids(t); !slices.Equal(got, kids) {
		t.Errorf("JWKS kids after the restore %v, want %v", got, kids)
	}
	r.expectUserinfo(t, aliceShop.access, aliceShop.sub) // issued before the backup
	resp := r.refresh(t, shop, aliceShop.refresh).ExpectStatus(t, http.StatusOK)
	if str(resp.Object(t)["access_token"]) == "" {
		t.Errorf("refresh after the restore: %s", resp.Body)
	}
	if got := r.tokensFor(t, shop, alice, "openid").sub; got != aliceShop.sub {
		t.Errorf("alice's sub at shop after the restore %q, want %q", got, aliceShop.sub)
	}
	if got := r.tokensFor(t, dyn, bob, "openid").sub; got != bobDyn.sub { // the dynamic client, its secret too
		t.Errorf("bob's sub at the dynamic client after the restore %q, want %q", got, bobDyn.sub)
	}
}

// badgerRecords counts the live records of the Badger store in dir, 0 when there is
// none, reading it with Badger itself.
func badgerRecords(t *testing.T, dir string) int {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); os.IsNotExist(err) {
		return 0
	}
	db, err := badger.Open(badger.DefaultOptions(dir).WithReadOnly(true).WithLogger(nil))
	if err != nil {
		t.Fatalf("opening the Badger store read-only: %v", err)
	}
	defer db.Close()
	n := 0
	err = db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

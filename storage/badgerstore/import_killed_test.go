package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/palmgate/palmgate/storage"
)

// killedImportEnv names the store a child process imports into (see
// TestImportKilledMidway).
const killedImportEnv = "BADGERSTORE_KILLED_IMPORT_DIR"

// stallingExporter exports records of 4 KiB until more than fit one Badger
// transaction have been handed over (so some batches are committed), then
// writes the file ready and blocks, as a restore does that is killed midway.
type stallingExporter struct{ ready string }

func (e stallingExporter) Export(ctx context.Context, fn func(storage.Record) error) error {
	value := make([]byte, 4<<10)
	for i := 0; ; i++ {
		if err := fn(storage.Record{Key: fmt.Appendf(nil, "agent/d/%08d", i), Value: value}); err != nil {
			return err
		}
		if i == 3000 { // 12 MiB: about five transactions of 2.4 MiB committed
			if err := os.WriteFile(e.ready, nil, 0o600); err != nil {
				return err
			}
			<-ctx.Done()
			return ctx.Err()
		}
	}
}

// TestImportKilledMidway (third review, finding 4): Import commits a large
// import in batches and drops them on an error, but a restore killed midway
// (SIGKILL, the OOM killer, a SIGTERM that `caddy palmgate restore` does not
// catch, a power cut) drops nothing: the directory held part of the backup, a
// store palmgate opened and served (signing keys without clients, agents'
// key index entries without their records), and which looked like any other.
// Open must refuse such a store, naming the unfinished import.
func TestImportKilledMidway(t *testing.T) {
	if dir := os.Getenv(killedImportEnv); dir != "" {
		s, err := Open(dir, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		_, err = s.Import(context.Background(), stallingExporter{ready: dir + ".ready"})
		fmt.Fprintln(os.Stderr, "import returned:", err)
		os.Exit(3)
	}
	dir := filepath.Join(t.TempDir(), "store")
	cmd := exec.Command(os.Args[0], "-test.run=^TestImportKilledMidway$")
	cmd.Env = append(os.Environ(), killedImportEnv+"="+dir)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for ready := false; !ready; {
		select {
		case err := <-exited:
			t.Fatalf("the importing process ended before it was killed: %v", err)
		case <-time.After(20 * time.Millisecond):
			_, err := os.Stat(dir + ".ready")
			ready = err == nil
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited

	s, err := Open(dir, nil)
	if err == nil {
		defer s.Close()
		n := 0
		_ = s.View(context.Background(), func(txn storage.Txn) error {
			return txn.Iterate(nil, func(_, _ []byte) (bool, error) { n++; return true, nil })
		})
		t.Fatalf("a store whose import was killed midway opened, holding %d records of it; want Open refused", n)
	}
	if !errors.Is(err, ErrUnfinishedImport) {
		t.Fatalf("Open: %v, want ErrUnfinishedImport", err)
	}
}

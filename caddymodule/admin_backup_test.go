package caddymodule

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/event/eventtest"
	"github.com/palmgate/palmgate/storage"
)

// exporter exports n records of 1 KiB, then fails with err (when not nil).
type exporter struct {
	n   int
	err error
}

func (e exporter) Export(ctx context.Context, fn func(storage.Record) error) error {
	for i := range e.n {
		if err := fn(storage.Record{Key: fmt.Appendf(nil, "k/%06d", i), Value: bytes.Repeat([]byte("v"), 1024)}); err != nil {
			return err
		}
	}
	return e.err
}

// TestServeBackup: a complete backup is answered 200 and verifies; a store failing
// before the first byte is answered 503; one failing after the answer began cuts the
// connection, so the client cannot take the partial body for a backup.
func TestServeBackup(t *testing.T) {
	lost := errors.New("connection to the database lost")
	tests := []struct {
		name   string
		src    exporter
		status int
		cut    bool
	}{
		{name: "complete", src: exporter{n: 500}, status: http.StatusOK},
		{name: "fails at once", src: exporter{err: lost}, status: http.StatusServiceUnavailable},
		{name: "fails midway", src: exporter{n: 500, err: lost}, status: http.StatusOK, cut: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if err := serveBackup(w, r, tt.src, storage.BackupHeader{Created: time.Now()}, zap.NewNop(), nil); err != nil {
					http.Error(w, err.Error(), err.(caddy.APIError).HTTPStatus)
				}
			}))
			defer srv.Close()
			resp, err := http.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
			body, readErr := io.ReadAll(resp.Body)
			if tt.cut {
				if readErr == nil {
					t.Fatalf("read %d bytes and no error: the partial backup looks complete", len(body))
				}
				if _, err := storage.VerifyBackup(context.Background(), bytes.NewReader(body)); !errors.Is(err, storage.ErrBadBackup) {
					t.Errorf("the partial body verifies: %v", err)
				}
				return
			}
			if readErr != nil {
				t.Fatal(readErr)
			}
			if tt.status != http.StatusOK {
				return
			}
			sum, err := storage.VerifyBackup(context.Background(), bytes.NewReader(body))
			if err != nil || sum.Records != tt.src.n {
				t.Errorf("the backup answered: %d records, %v", sum.Records, err)
			}
		})
	}
}

// TestBackupAudited (fourth review): a backup holds the signing keys, the pairwise
// secret and the client secrets' hashes, so taking one is an event of the audit
// log ("backup taken", with the admin caller's address); a backup that failed is
// none.
func TestBackupAudited(t *testing.T) {
	for _, tt := range []struct {
		name string
		src  exporter
		want int
	}{
		{"complete", exporter{n: 3}, 1},
		{"fails at once", exporter{err: errors.New("lost")}, 0},
		{"fails midway", exporter{n: 500, err: errors.New("lost")}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var rec eventtest.Recorder
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if err := serveBackup(w, r, tt.src, storage.BackupHeader{Created: time.Now()}, zap.NewNop(), rec.Sink()); err != nil {
					http.Error(w, err.Error(), err.(caddy.APIError).HTTPStatus)
				}
			}))
			defer srv.Close()
			if resp, err := http.Get(srv.URL); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			got := rec.Take()
			if len(got) != tt.want || (tt.want == 1 && got[0].Kind != event.BackupTaken) {
				t.Errorf("events %+v, want %d BackupTaken", got, tt.want)
			}
		})
	}
	core, logs := observer.New(zapcore.DebugLevel)
	sink := newEventSink(zap.New(core).Named("palmgate").Named(AuditLoggerName))
	sink(event.WithRemote(context.Background(), "127.0.0.1"), event.Event{Kind: event.BackupTaken})
	if e := logs.All(); len(e) != 1 || e[0].Message != "backup taken" || e[0].ContextMap()["remote"] != "127.0.0.1" {
		t.Errorf("audit entries %+v, want one \"backup taken\" naming the caller", e)
	}
}

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
				if err := serveBackup(w, r, tt.src, storage.BackupHeader{Created: time.Now()}, zap.NewNop()); err != nil {
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

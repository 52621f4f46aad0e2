package caddymodule

import (
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/storage"
)

// The admin route of backups (see AdminAPI):
//
//	GET /palmgate/backup   streams a backup of the whole store (storage/backup.go's
//	                       format) from one consistent snapshot, while the instance
//	                       keeps serving
//
// The body is the backup file: it holds the signing keys, the pairwise secret and
// the client secrets' hashes, so it is as sensitive as the database. `caddy palmgate
// backup` saves it (0600) and verifies it. An error after the answer has begun
// aborts the connection: the client sees a truncated body, which no restore accepts.

// adminBackup serves /palmgate/backup.
func adminBackup(w http.ResponseWriter, r *http.Request) error {
	if err := allowOnly(w, r, http.MethodGet); err != nil {
		return err
	}
	app, err := activeApp()
	if err != nil {
		return err
	}
	src, ok := app.Store().(storage.Exporter)
	if !ok {
		return adminError(http.StatusNotImplemented, "the %s store cannot be backed up", app.Storage.Backend)
	}
	header := storage.BackupHeader{Palmgate: Version(), Created: time.Now().UTC(), Backend: app.Storage.Backend}
	return serveBackup(w, r, src, header, caddy.Log().Named("palmgate.backup"), app.Events())
}

// serveBackup streams the backup of src as the answer to r and, once it is whole,
// tells events (the audit log: a backup holds the signing keys), naming the
// admin caller.
func serveBackup(w http.ResponseWriter, r *http.Request, src storage.Exporter, header storage.BackupHeader, log *zap.Logger, events event.Sink) error {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="palmgate-%s.backup"`, header.Created.Format("20060102T150405Z")))
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	out := &startedWriter{w: w}
	sum, err := storage.WriteBackup(r.Context(), out, src, header)
	if err != nil {
		log.Error("backup failed", zap.Int("records_written", sum.Records), zap.Error(err))
		if out.started {
			panic(http.ErrAbortHandler) // the client must not take a partial body for a backup
		}
		w.Header().Del("Content-Disposition")
		return caddy.APIError{HTTPStatus: http.StatusServiceUnavailable, Err: fmt.Errorf("backup: %w", err)}
	}
	log.Info("backup taken", zap.Int("records", sum.Records), zap.Duration("duration", time.Since(header.Created)),
		zap.String("backend", header.Backend))
	events.Emit(adminContext(r), event.Event{Kind: event.BackupTaken})
	return nil
}

// startedWriter records whether the answer has begun (its first byte written): an
// error before it can still be answered with a status.
type startedWriter struct {
	w       http.ResponseWriter
	started bool
}

func (s *startedWriter) Write(p []byte) (int, error) {
	s.started = true
	return s.w.Write(p)
}

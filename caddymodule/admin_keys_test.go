package caddymodule

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/event/eventtest"
	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/internal/clocktest"
	"github.com/palmgate/palmgate/internal/keystest"
	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/memstore"
	"github.com/palmgate/palmgate/storage/storagetest"
)

// keysApp is an app with just a key set on store, its clock at start.
func keysApp(t *testing.T, store storage.Store, clock *clocktest.Clock, every time.Duration) *App {
	t.Helper()
	a := &App{AccessTokenTTL: caddy.Duration(time.Hour), RefreshTokenTTL: caddy.Duration(2 * time.Hour),
		KeyRotation: caddy.Duration(every), logger: zap.NewNop()}
	set, err := keys.Open(context.Background(), store, clock.Now, keys.WithGenerator(keystest.Generator), keys.WithLifetimes(a.tokenLifetimes()))
	if err != nil {
		t.Fatal(err)
	}
	a.keys = set
	return a
}

// TestAdminKeyList: the list shows each key's state and times to the second: the
// active keys' next rotation, the retired key's retirement and drop.
func TestAdminKeyList(t *testing.T) {
	start := time.Date(2026, 11, 20, 9, 0, 0, 123456789, time.UTC)
	clock := clocktest.New(start)
	a := keysApp(t, memstore.New(), clock, 720*time.Hour)
	old := a.keys.Active(keys.ES256).ID
	clock.Advance(time.Hour)
	rec := httptest.NewRecorder()
	if err := a.rotateKeys(rec, httptest.NewRequest("POST", "/palmgate/keys/rotate", nil), []string{keys.ES256}); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("rotate: %v, %d", err, rec.Code)
	}
	l := a.keyList()
	if l.KeyRotation != "720h0m0s" || len(l.Keys) != 4 {
		t.Fatalf("list = %+v, want key_rotation 720h0m0s and 4 keys", l)
	}
	second := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)
	for _, k := range l.Keys {
		for name, v := range map[string]string{"created": k.Created, "rotates_at": k.RotatesAt, "retired_at": k.RetiredAt, "drops_at": k.DropsAt} {
			if v != "" && !second.MatchString(v) {
				t.Errorf("key %s %s = %q, want RFC 3339 UTC to the second", k.KID, name, v)
			}
		}
		switch {
		case k.KID == old:
			if k.State != "retired" || k.RetiredAt != "2026-11-20T10:00:00Z" || k.DropsAt != "2026-11-20T12:01:00Z" || k.RotatesAt != "" {
				t.Errorf("the retired key: %+v; want retired at 10:00:00, dropping 2h1m later", k)
			}
		case k.State != "active" || k.RetiredAt != "" || k.DropsAt != "":
			t.Errorf("key %+v: want active", k)
		case k.Alg == keys.ES256 && k.RotatesAt != "2026-12-20T10:00:00Z":
			t.Errorf("the new ES256 key rotates at %s, want 30 days after its creation", k.RotatesAt)
		case k.Alg != keys.ES256 && k.RotatesAt != "2026-12-20T09:00:00Z":
			t.Errorf("the %s key rotates at %s, want 30 days after its creation", k.Alg, k.RotatesAt)
		}
	}
	a.KeyRotation = 0
	if l := a.keyList(); l.KeyRotation != "off" || l.Keys[0].RotatesAt != "" {
		t.Errorf("without key_rotation: %+v, want off and no rotates_at", l)
	}
}

// TestAdminRotateStoreDown: a rotation while the database is unavailable answers
// 503 (it answered 500), and changes nothing.
func TestAdminRotateStoreDown(t *testing.T) {
	store := &storagetest.DownStore{Store: memstore.New()}
	a := keysApp(t, store, clocktest.New(time.Now()), 0)
	before := a.keys.Active(keys.RS256).ID
	store.Down.Store(true)
	err := a.rotateKeys(httptest.NewRecorder(), httptest.NewRequest("POST", "/palmgate/keys/rotate", nil), keys.Algorithms)
	var apiErr caddy.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatus != http.StatusServiceUnavailable {
		t.Fatalf("rotate with the store down = %v, want a 503 APIError", err)
	}
	if a.keys.Active(keys.RS256).ID != before {
		t.Error("the failed rotation changed the active key")
	}
}

// TestRotationEvents: a rotation through the admin API is one KeysRotated event
// (manual), after its commit; a failed one is none.
func TestRotationEvents(t *testing.T) {
	store := &storagetest.DownStore{Store: memstore.New()}
	a := keysApp(t, store, clocktest.New(time.Now()), 0)
	var rec eventtest.Recorder
	a.events = rec.Sink()
	if err := a.rotateKeys(httptest.NewRecorder(), httptest.NewRequest("POST", "/palmgate/keys/rotate", nil), keys.Algorithms); err != nil {
		t.Fatal(err)
	}
	if got := rec.Take(); len(got) != 1 || got[0] != (event.Event{Kind: event.KeysRotated, Outcome: event.Manual}) {
		t.Errorf("events = %+v, want one manual KeysRotated", got)
	}
	store.Down.Store(true)
	_ = a.rotateKeys(httptest.NewRecorder(), httptest.NewRequest("POST", "/palmgate/keys/rotate", nil), keys.Algorithms)
	if got := rec.Take(); len(got) != 0 {
		t.Errorf("a failed rotation emitted %+v", got)
	}
}

// TestRotationHalfDone (fourth review): the database goes away right after the
// first algorithm's rotation commits. That key is rotated (every instance signs
// with it within 2 s), so the rotation is audited and counted, and the answer
// names what was rotated and what was not, rather than a bare 503 that says
// nothing changed.
func TestRotationHalfDone(t *testing.T) {
	store := &storagetest.DownStore{Store: memstore.New()}
	a := keysApp(t, store, clocktest.New(time.Now()), 0)
	var rec eventtest.Recorder
	a.events = rec.Sink()
	before := a.keys.Active(keys.RS256).ID
	store.DownAfterUpdate.Store(true)
	err := a.rotateKeys(httptest.NewRecorder(), httptest.NewRequest("POST", "/palmgate/keys/rotate", nil), keys.Algorithms)
	var apiErr caddy.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatus != http.StatusServiceUnavailable {
		t.Fatalf("rotate = %v, want a 503 APIError for the algorithms not rotated", err)
	}
	store.Down.Store(false)
	store.DownAfterUpdate.Store(false)
	reopened, err := keys.Open(context.Background(), store, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	after := reopened.Active(keys.RS256).ID
	if after == before {
		t.Fatal("the RS256 rotation did not commit: the test's store went down too early")
	}
	if msg := apiErr.Err.Error(); !regexp.MustCompile(`RS256 .*`+regexp.QuoteMeta(after)).MatchString(msg) ||
		!regexp.MustCompile(`ES256, EdDSA`).MatchString(msg) {
		t.Errorf("the answer %q does not say that RS256 was rotated (kid %s) and ES256, EdDSA were not", msg, after)
	}
	if got := rec.Take(); len(got) != 1 || got[0] != (event.Event{Kind: event.KeysRotated, Outcome: event.Manual}) {
		t.Errorf("events = %+v, want one manual KeysRotated for the rotation that committed", got)
	}
}

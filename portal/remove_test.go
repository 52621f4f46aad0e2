package portal

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/palmgate/palmgate/core/oidc"
	"github.com/palmgate/palmgate/storage/memstore"
	"github.com/palmgate/palmgate/storage/storagetest"
)

// TestRemoveStandsWhenItsCleanUpFails: when ending a deleted application's grants
// and consents fails (oidc.ErrAfterClientDeletion), the portal reports the
// deletion done (back to the list, as after any deletion) and logs the rest as a
// warning naming the client, rather than showing an error for a deletion that
// happened.
func TestRemoveStandsWhenItsCleanUpFails(t *testing.T) {
	store := &storagetest.DownStore{Store: memstore.New()}
	p, _ := newPortalOn(t, "http://127.0.0.1:8080", store)
	core, logs := observer.New(zap.WarnLevel)
	p.logger = zap.New(core)
	cookie := signedIn(p, devA)
	csrf := csrfOf(t, p, cookie)
	r := serve(p, "POST", "/portal/apps", url.Values{"csrf": {csrf}, "name": {"Doomed"}, "redirect_uris": {"https://doomed.example/cb"}}, cookie)
	id := regexp.MustCompile(`id="client-id">([^<]+)<`).FindStringSubmatch(r.Body.String())
	if r.Code != http.StatusOK || id == nil {
		t.Fatalf("create: %d\n%s", r.Code, r.Body)
	}

	store.DownAfterUpdate.Store(true)
	r = serve(p, "POST", "/portal/apps/"+id[1]+"/delete", url.Values{"csrf": {csrf}}, cookie)
	if !store.Down.Load() {
		t.Fatal("the deletion wrote nothing: the clean-up never met the failing store")
	}
	if r.Code != http.StatusSeeOther || r.Header().Get("Location") != "/portal" {
		t.Errorf("delete with its clean-up failing: %d (Location %q), want 303 to /portal\n%s", r.Code, r.Header().Get("Location"), r.Body)
	}
	warned := logs.FilterMessage("portal: the deleted client's grants and consents").All()
	if len(warned) != 1 {
		t.Fatalf("%d warnings about the clean-up, want 1; the log: %v", len(warned), logs.All())
	}
	fields := warned[0].ContextMap()
	if fields["client_id"] != id[1] || !strings.Contains(fields["error"].(string), "connection refused") ||
		!strings.Contains(fields["error"].(string), oidc.ErrAfterClientDeletion.Error()) {
		t.Errorf("the warning's fields %v, want the client id and the clean-up's error", fields)
	}

	store.DownAfterUpdate.Store(false)
	store.Down.Store(false)
	if apps, err := p.oidc.Clients().List(context.Background(), devA); err != nil || len(apps) != 0 {
		t.Errorf("after the deletion the developer has %d applications (%v), want none", len(apps), err)
	}
}

package caddymodule

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/palmgate/palmgate/core/bearer"
)

// TestBearerPrefetchWarning: a remote issuer that cannot be reached at provision is
// reported as not reached, with what happens meanwhile (503); a prefetch whose
// config was discarded (caddy validate, a failed reload) reports nothing, rather
// than a warning that reads as if the issuer were checked.
func TestBearerPrefetchWarning(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	issuer := down.URL
	down.Close()
	for _, discarded := range []bool{false, true} {
		core, logs := observer.New(zap.DebugLevel)
		b := &Bearer{Issuer: issuer, logger: zap.New(core)}
		ctx, cancel := context.WithCancel(t.Context())
		if discarded {
			cancel()
		}
		b.prefetch(ctx, bearer.NewRemoteKeys(issuer, &http.Client{Timeout: 5 * time.Second}, time.Second, nil))
		cancel()
		got := logs.AllUntimed()
		if discarded {
			if len(got) != 0 {
				t.Errorf("discarded config: logged %q", got[0].Message)
			}
			continue
		}
		if len(got) != 1 || got[0].Level != zap.WarnLevel ||
			!strings.Contains(got[0].Message, "not reached") || !strings.Contains(got[0].Message, "503") {
			t.Errorf("unreachable issuer: logged %v, want one warning saying it was not reached and that its tokens get 503", got)
		}
	}
}

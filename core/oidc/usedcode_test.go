package oidc

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/palmgate/palmgate/storage"
)

// TestUsedCodeKeepsOnlyWhatReuseNeeds: once exchanged, a code's record keeps only
// what a second use needs (its client, human, expiry and grant), not the redirect
// URI, scopes, nonce or PKCE challenge of its request: a smaller rewrite in the
// exchange's commit (issue 19), and less kept about a spent code. A second use
// still revokes the grant (TestCodeReuseRevokes, TestFirstPartyReuse...).
func TestUsedCodeKeepsOnlyWhatReuseNeeds(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	l := h.login(t, params("scope", "openid offline_access", "code_challenge", pkceChallengeB, "code_challenge_method", "S256"), "alice")
	h.exchange(t, l, pkceVerifierB)
	var raw []byte
	if err := h.store.View(ctx, func(txn storage.Txn) error {
		var err error
		raw, err = txn.Get(codeKey(l.code))
		return err
	}); err != nil {
		t.Fatalf("reading the used code: %v", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatalf("decoding the used code: %v", err)
	}
	got := slices.Sorted(maps.Keys(fields))
	want := []string{"clientId", "expiresAt", "grantId", "humanId"}
	if !slices.Equal(got, want) {
		t.Errorf("the used code's record has %v, want only %v: %s", got, want, raw)
	}
	var rec codeRecord
	if err := json.Unmarshal(raw, &rec); err != nil || rec.ClientID != "app" || rec.HumanID != l.humanID || rec.GrantID == "" || rec.ExpiresAt.IsZero() {
		t.Errorf("the used code's record = %+v, %v: want its client, human, grant and expiry", rec, err)
	}
	// A second use is still refused and revokes the grant.
	wantError(t, h.ex("app", l.code, appRedirect, pkceVerifierB), ErrInvalidGrant)
}

// BenchmarkUsedCodeRecord is the encoding of a used code's record in the
// exchange's transaction: the whole record as it was written before (issue 19),
// and what is written now.
func BenchmarkUsedCodeRecord(b *testing.B) {
	now := time.Now()
	rec := codeRecord{
		ClientID: "bench-rs", RedirectURI: "https://bench.example/callback", Scopes: []string{"offline_access", "openid"},
		Nonce: "n-0123456789abcdef", CodeChallenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
		HumanID: "3a209834-e24a-426d-9d55-88f436725104", AuthTime: now, ExpiresAt: now.Add(time.Minute),
	}
	grantID := "6e195e7c-bf2d-4a64-a04a-5aaf7ca20e41"
	for _, c := range []struct {
		name string
		rec  codeRecord
	}{{"whole", func() codeRecord { r := rec; r.GrantID = grantID; return r }()}, {"used", rec.used(grantID)}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var n int
			for b.Loop() {
				out, err := json.Marshal(c.rec)
				if err != nil {
					b.Fatal(err)
				}
				n = len(out)
			}
			b.ReportMetric(float64(n), "bytes")
		})
	}
}

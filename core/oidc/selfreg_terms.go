package oidc

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/palmgate/palmgate/storage"
)

// A self-registered client's terms (the grant_types and the
// token_endpoint_auth_method it registered) are kept twice: in its client
// record, and in a record of their own beside it. A release before 2026-11-27
// (second session) knows neither field: running beside this one on one database
// during a rolling upgrade, it rewrites a client this one registered (the first
// token it issues to the client extends its expiry, Clients.touch; an admin
// update; a secret rotation) without them, and the client would then be read
// as one registered before they were kept: every grant, either method, for
// good. The copy, which no older release writes, restores them.
//
//	oidc/selfreg-terms/{clientId} -> selfRegTerms (JSON), kept longer than the client (termsTTL)

func selfRegTermsKey(id string) []byte { return []byte("oidc/selfreg-terms/" + id) }

// termsTTL is how long the copy of the terms of a client kept for ttl is kept:
// longer, by as much as an older instance's use may extend the client without
// writing them (a use keeps it for the longer of refresh_token_ttl and the
// registration's unused period, touch), so that a client an older instance kept
// alive never outlives its terms; 0 (for ever) stays 0.
func (r *Clients) termsTTL(ttl time.Duration) time.Duration {
	if ttl == 0 {
		return 0
	}
	return ttl + max(r.refreshTTL, r.unused()) + time.Hour
}

type selfRegTerms struct {
	GrantTypes []string `json:"grantTypes"`
	AuthMethod string   `json:"authMethod,omitempty"`
}

// putSelfRegTerms writes rec's terms beside it, kept for ttl (0: for ever), when
// it has any (a client registered before they were kept has none).
func putSelfRegTerms(txn storage.Txn, rec *clientRecord, ttl time.Duration) error {
	if !rec.SelfRegistered || rec.GrantTypes == nil {
		return nil
	}
	b, err := json.Marshal(selfRegTerms{GrantTypes: rec.GrantTypes, AuthMethod: rec.AuthMethod})
	if err != nil {
		return err
	}
	return txn.Set(selfRegTermsKey(rec.ID), b, ttl)
}

// restoreSelfRegTerms fills in the terms of a self-registered record an older
// release rewrote without them, from the copy beside it read by get; a record
// with no copy keeps none (registered before they were kept).
func restoreSelfRegTerms(rec *clientRecord, get func(key []byte) ([]byte, error)) error {
	if !rec.SelfRegistered || rec.GrantTypes != nil {
		return nil
	}
	b, err := get(selfRegTermsKey(rec.ID))
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var terms selfRegTerms
	if err := json.Unmarshal(b, &terms); err != nil {
		return err
	}
	rec.GrantTypes, rec.AuthMethod = terms.GrantTypes, terms.AuthMethod
	return nil
}

// restoreSelfRegTermsRead is restoreSelfRegTerms outside a transaction.
func restoreSelfRegTermsRead(ctx context.Context, s storage.Store, rec *clientRecord) error {
	return restoreSelfRegTerms(rec, func(key []byte) ([]byte, error) { return storage.ReadKey(ctx, s, key) })
}

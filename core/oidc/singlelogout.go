package oidc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/storage"
)

// Single logout: a login made through an SSO session is one whose code was
// issued by a request the session answered (AuthRequest.SessionHash) or by the
// palm scan that started the session. Its code carries the id of the grant its
// exchange will start (codeRecord.PlannedGrant), and the code's transaction
// writes the index entry oidc/sso-grant/{sessionHash}/{grantId}, kept as long as
// the session can live; the exchange copies the session's hash into the grant
// (grant.Session), and keeps the grant's record at least as long as the session
// (grant.KeepUntil: a login without offline_access outlives its tokens at its
// client). The token endpoint writes nothing more than before.
//
// A logout with an id_token_hint ends every login made through the session its
// login was made through, and through the browser's own session (its cookie)
// when that session is the hint's person's; each client with a
// backchannel_logout_uri is told once per login (notifyEnded). A logout
// without a hint revokes nothing (anyone's page can send one).

func ssoGrantPrefix(hash string) []byte { return []byte("oidc/sso-grant/" + hash + "/") }
func ssoGrantKey(hash, grantID string) []byte {
	return append(ssoGrantPrefix(hash), grantID...)
}

// putCode stores code for the verified login ar. session is the hash of the
// SSO session the login is made through ("" for none) and sessionEnd the end
// of that session: the code then plans its grant's id and indexes it under the
// session until sessionEnd.
func (s *Service) putCode(txn storage.Txn, code string, ar *AuthRequest, session string, sessionEnd time.Time) error {
	now := s.now()
	rec := codeRecord{
		ClientID: ar.ClientID, RedirectURI: ar.RedirectURI, Scopes: ar.Scopes, Resource: ar.Resource, Nonce: ar.Nonce,
		CodeChallenge: ar.CodeChallenge, HumanID: ar.HumanID, AuthTime: ar.AuthTime,
		ExpiresAt: now.Add(s.codeTTL),
	}
	if session != "" && sessionEnd.After(now) {
		rec.PlannedGrant, rec.Session, rec.SessionEnd = uuid.NewString(), session, sessionEnd
		// The entry names the code's key: a logout before the exchange deletes
		// the code (endLogins), so no login it did not see starts after it.
		if err := txn.Set(ssoGrantKey(session, rec.PlannedGrant), codeKey(code), sessionEnd.Sub(now)); err != nil {
			return err
		}
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return txn.Set(codeKey(code), b, s.codeTTL)
}

// endLogins revokes grant grantID, named by a logout's id_token_hint whose
// subject at cl's sector is hintSub, and every login made through its SSO
// session and through the browser's (browser, the id in its cookie, "" for
// none) when that one is the hint's person's; it ends those sessions. It
// reports whether grantID was live until then and how many live logins it
// ended.
func (s *Service) endLogins(ctx context.Context, grantID, hintSub string, cl *client, browser string) (live bool, logins int, err error) {
	var done []revocation
	err = s.store.Update(ctx, func(txn storage.Txn) error {
		live, done = false, done[:0] // fn may run again: nothing of a run before
		var sessions []string
		g, err := getGrant(txn, grantID)
		var oe *fault.Error
		switch {
		case err == nil:
			live = !g.Revoked
			if g.Session != "" {
				sessions = append(sessions, g.Session)
			}
		case !errors.As(err, &oe): // a fault: expired from the store
			return err
		}
		// The browser's session only for a hint of a login live until now: an
		// old hint (revoked, expired from the store) may be anyone's copy, from
		// logs or browser storage, sent with the person's browser (fourth review).
		if live && validSessionID(browser) && g.Session != sessionHash(browser) {
			sess, err := s.getSession(txn, sessionHash(browser))
			if err != nil {
				return err
			}
			// Only the hint's person's: a page holding another person's ID token
			// ends nothing of whoever's browser it sends there.
			if sess != nil && PairwiseSubject(s.pairwiseSecret, cl.sector, sess.HumanID) == hintSub {
				sessions = append(sessions, sessionHash(browser))
			}
		}
		ids := []string{grantID}
		for _, hash := range sessions {
			var keys, codes [][]byte
			prefix := ssoGrantPrefix(hash)
			err := txn.Iterate(prefix, func(k, v []byte) (bool, error) {
				keys = append(keys, append([]byte(nil), k...))
				if id := string(k[len(prefix):]); id != grantID {
					ids = append(ids, id)
				}
				if len(v) > 0 { // an entry of an earlier release names no code
					codes = append(codes, append([]byte(nil), v...))
				}
				return true, nil
			})
			if err != nil {
				return err
			}
			for _, k := range keys {
				if err := txn.Delete(k); err != nil {
					return err
				}
			}
			if err := deleteUnusedCodes(txn, codes); err != nil {
				return err
			}
			if err := s.dropSession(txn, hash); err != nil {
				return err
			}
		}
		ids = slices.DeleteFunc(ids, func(id string) bool {
			_, err := uuid.Parse(id)
			return err != nil // not a grant id: nothing this package wrote
		})
		done, err = s.revokeGrants(txn, ids, done)
		return err
	})
	if err != nil {
		return false, 0, err
	}
	for _, r := range done {
		if r.ended != nil {
			logins++
		}
	}
	s.committed(done...)
	s.notifyEnded(ctx, done...)
	return live, logins, nil
}

// deleteUnusedCodes deletes the codes under keys not yet exchanged: one issued
// through a session just before its logout, redeemed after it, is then
// invalid_grant instead of a login the logout did not see (fourth review). A
// code already exchanged stays, so that its reuse still revokes its grant.
func deleteUnusedCodes(txn storage.Txn, keys [][]byte) error {
	for _, k := range keys {
		if !bytes.HasPrefix(k, []byte("oidc/code/")) {
			continue // not a key this package wrote
		}
		b, err := txn.Get(k)
		if errors.Is(err, storage.ErrNotFound) {
			continue // expired, or deleted
		}
		if err != nil {
			return err
		}
		if rec, err := decodeCode(b); err == nil && rec.GrantID != "" {
			continue
		}
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

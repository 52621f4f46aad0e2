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
func ssoNextKey(hash string) []byte     { return []byte("oidc/sso-next/" + hash) }

// maxSessionChain bounds how many sessions a logout follows through
// oidc/sso-next (one per new scan of the same person in one browser).
const maxSessionChain = 32

// carryLogins: a new palm scan of humanID in a browser whose session oldHash
// was that person's starts session newHash, which keeps the old one's logins
// (its index entries, copied until the new one ends), and oldHash forwards to
// newHash: a logout of a login of either ends both. The person signed in to
// those applications in this browser and expects one sign-out to end them
// (2026-11-27). Another person's scan takes nothing of the old session.
func (s *Service) carryLogins(txn storage.Txn, oldHash, newHash, humanID string) error {
	prev, err := s.getSession(txn, oldHash)
	if err != nil || prev == nil || prev.HumanID != humanID {
		return err
	}
	type entry struct{ id, v []byte }
	var entries []entry
	prefix := ssoGrantPrefix(oldHash)
	err = txn.Iterate(prefix, func(k, v []byte) (bool, error) {
		entries = append(entries, entry{bytes.Clone(k[len(prefix):]), bytes.Clone(v)})
		return true, nil
	})
	if err != nil {
		return err
	}
	end := s.now().Add(s.ssoTTL)
	for _, e := range entries {
		if err := txn.Set(ssoGrantKey(newHash, string(e.id)), e.v, s.ssoTTL); err != nil {
			return err
		}
		// Its record is kept as long as the new session, as a login made
		// through it (grant.KeepUntil); a code not yet exchanged keeps the old
		// session's end.
		if _, err := uuid.Parse(string(e.id)); err != nil {
			continue
		}
		g, err := getGrant(txn, string(e.id))
		var oe *fault.Error
		switch {
		case errors.As(err, &oe): // not exchanged yet, or expired from the store
			continue
		case err != nil:
			return err
		}
		if !g.Revoked && g.KeepUntil.Before(end) {
			g.KeepUntil = end
			if err := s.putGrant(txn, string(e.id), g, 0); err != nil {
				return err
			}
		}
	}
	return txn.Set(ssoNextKey(oldHash), []byte(newHash), s.ssoTTL)
}

// sessionChain is hash and the sessions it was carried into (carryLogins).
func sessionChain(txn storage.Txn, hash string) ([]string, error) {
	chain := []string{hash}
	for len(chain) < maxSessionChain {
		next, err := txn.Get(ssoNextKey(chain[len(chain)-1]))
		if errors.Is(err, storage.ErrNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		if slices.Contains(chain, string(next)) {
			break
		}
		chain = append(chain, string(next))
	}
	return chain, nil
}
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
// reports whether grantID was live until then, how many live logins it ended
// and whose they were (humanID, "" when the hint's login is gone from the store
// and none ended).
//
// kept reports that the browser holds a live session whose logins go on (another
// person's, or the hint was stale): its page must not say its sign-ins ended;
// browserEnded that the browser's live session was among those ended.
func (s *Service) endLogins(ctx context.Context, grantID, hintSub string, cl *client, browser string) (live bool, logins int, humanID string, kept, browserEnded bool, err error) {
	var done []revocation
	err = s.store.Update(ctx, func(txn storage.Txn) error {
		live, humanID, kept, browserEnded, done = false, "", false, false, done[:0] // fn may run again: nothing of a run before
		var sessions []string
		g, err := getGrant(txn, grantID)
		var oe *fault.Error
		switch {
		case err == nil:
			live, humanID = !g.Revoked, g.HumanID
			switch {
			case g.Session != "" && live:
				if sessions, err = sessionChain(txn, g.Session); err != nil {
					return err
				}
			case g.Session != "": // an old hint: its own session, none it was carried into
				sessions = []string{g.Session}
			}
		case !errors.As(err, &oe): // a fault: expired from the store
			return err
		}
		// The browser's session only for a hint of a login live until now: an
		// old hint (revoked, expired from the store) may be anyone's copy, from
		// logs or browser storage, sent with the person's browser (2026-11-27).
		if validSessionID(browser) && !slices.Contains(sessions, sessionHash(browser)) {
			sess, err := s.getSession(txn, sessionHash(browser))
			if err != nil {
				return err
			}
			// Only the hint's person's: a page holding another person's ID token
			// ends nothing of whoever's browser it sends there.
			if live && sess != nil && PairwiseSubject(s.pairwiseSecret, cl.sector, sess.HumanID) == hintSub {
				sessions = append(sessions, sessionHash(browser))
			} else {
				kept = sess != nil
			}
		}
		if validSessionID(browser) && slices.Contains(sessions, sessionHash(browser)) {
			sess, err := s.getSession(txn, sessionHash(browser))
			if err != nil {
				return err
			}
			browserEnded = sess != nil // dropped below, before the edge's EndSSOSession
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
			if err := txn.Delete(ssoNextKey(hash)); err != nil {
				return err
			}
			if err := s.dropSession(txn, hash); err != nil {
				return err
			}
		}
		seen := map[string]bool{} // a login carried into a later session is in both
		ids = slices.DeleteFunc(ids, func(id string) bool {
			_, err := uuid.Parse(id)
			dup := seen[id]
			seen[id] = true
			return err != nil || dup // not a grant id: nothing this package wrote
		})
		done, err = s.revokeGrants(txn, ids, done)
		return err
	})
	if err != nil {
		return false, 0, "", false, false, err
	}
	for _, r := range done {
		if r.ended != nil {
			logins++
			if humanID == "" {
				humanID = r.ended.humanID
			}
		}
	}
	s.committed(done...)
	s.notifyEnded(ctx, done...)
	return live, logins, humanID, kept, browserEnded, nil
}

// deleteUnusedCodes deletes the codes under keys not yet exchanged: one issued
// through a session just before its logout, redeemed after it, is then
// invalid_grant instead of a login the logout did not see (2026-11-27). A
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

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

// loginsEnded is what endLogins did.
type loginsEnded struct {
	live   bool // the hint's login was live until then
	logins int  // the live logins it ended
	// humanID is whose they were: "" when the hint's login is gone from the
	// store and none ended.
	humanID string
	// browserKept: the browser holds a live session whose logins go on
	// (another person's, or the hint was stale): its page must not say its
	// sign-ins ended.
	browserKept bool
	// browserEnded: the browser's live session was among those ended.
	browserEnded bool
}

// endLogins revokes grant grantID, named by a logout's id_token_hint whose
// subject at cl's sector is hintSub, and every login made through its SSO
// session and through the browser's (browser, the id in its cookie, "" for
// none) when that one is the hint's person's; it ends those sessions.
func (s *Service) endLogins(ctx context.Context, grantID, hintSub string, cl *client, browser string) (loginsEnded, error) {
	var out loginsEnded
	var done []revocation
	err := s.store.Update(ctx, func(txn storage.Txn) error {
		out, done = loginsEnded{}, done[:0] // fn may run again: nothing of a run before
		sessions, err := s.hintSessions(txn, grantID, hintSub, cl, browser, &out)
		if err != nil {
			return err
		}
		ids := []string{grantID}
		for _, hash := range sessions {
			if ids, err = s.endSessionLogins(txn, hash, grantID, ids); err != nil {
				return err
			}
		}
		done, err = s.revokeGrants(txn, grantIDs(ids), done)
		return err
	})
	if err != nil {
		return loginsEnded{}, err
	}
	for _, r := range done {
		if r.ended != nil {
			out.logins++
			if out.humanID == "" {
				out.humanID = r.ended.humanID
			}
		}
	}
	s.committed(done...)
	s.notifyEnded(ctx, done...)
	return out, nil
}

// hintSessions returns the sessions whose logins a logout with the hint of
// grant grantID ends, and sets out's live, humanID and browser fields: the
// hint's login's session and those it was carried into, and the browser's
// when that is the hint's person's and the hint's login was live until now.
func (s *Service) hintSessions(txn storage.Txn, grantID, hintSub string, cl *client, browser string, out *loginsEnded) ([]string, error) {
	var sessions []string
	g, err := getGrant(txn, grantID)
	var oe *fault.Error
	switch {
	case err == nil:
		out.live, out.humanID = !g.Revoked, g.HumanID
		switch {
		case g.Session != "" && out.live:
			if sessions, err = sessionChain(txn, g.Session); err != nil {
				return nil, err
			}
		case g.Session != "": // an old hint: its own session, none it was carried into
			sessions = []string{g.Session}
		}
	case !errors.As(err, &oe): // a fault: expired from the store
		return nil, err
	}
	if !validSessionID(browser) {
		return sessions, nil
	}
	hash := sessionHash(browser)
	sess, err := s.getSession(txn, hash)
	if err != nil {
		return nil, err
	}
	switch {
	case slices.Contains(sessions, hash):
		out.browserEnded = sess != nil // dropped by endSessionLogins, before the edge's EndSSOSession
	// The browser's session only for a hint of a login live until now: an old
	// hint (revoked, expired from the store) may be anyone's copy, from logs or
	// browser storage, sent with the person's browser (2026-11-27). And only the
	// hint's person's: a page holding another person's ID token ends nothing of
	// whoever's browser it sends there.
	case out.live && sess != nil && PairwiseSubject(s.pairwiseSecret, cl.sector, sess.HumanID) == hintSub:
		sessions = append(sessions, hash)
		out.browserEnded = true
	default:
		out.browserKept = sess != nil
	}
	return sessions, nil
}

// endSessionLogins ends session hash: its index of logins, its codes not yet
// exchanged, its forward and its record; it returns ids with the session's
// grant ids (but grantID) appended.
func (s *Service) endSessionLogins(txn storage.Txn, hash, grantID string, ids []string) ([]string, error) {
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
		return nil, err
	}
	for _, k := range keys {
		if err := txn.Delete(k); err != nil {
			return nil, err
		}
	}
	if err := deleteUnusedCodes(txn, codes); err != nil {
		return nil, err
	}
	if err := txn.Delete(ssoNextKey(hash)); err != nil {
		return nil, err
	}
	return ids, s.dropSession(txn, hash)
}

// grantIDs is ids without repeats (a login carried into a later session is in
// both) and without what is not a grant id (nothing this package wrote).
func grantIDs(ids []string) []string {
	seen := map[string]bool{}
	return slices.DeleteFunc(ids, func(id string) bool {
		_, err := uuid.Parse(id)
		dup := seen[id]
		seen[id] = true
		return err != nil || dup
	})
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

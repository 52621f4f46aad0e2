package oidc

import "testing"

// TestSelectAccountAsksForAScan checks OIDC Core 3.1.2.1's prompt=select_account
// within an SSO session: the person must be able to choose the account, and a palm
// scan is how they choose (whoever scans is the account). Before the fix the
// session answered at once with its own person's code, so an application's "use
// another account" button signed the same person in again, silently.
func TestSelectAccountAsksForAScan(t *testing.T) {
	h := newSSOHarness(t, ssoTTL)
	_, sess := h.scanLogin(t, nil, "alice", "")
	wantScan(t)(h.inSession(sess.ID, testBrowser, "prompt", "select_account"))
	wantScan(t)(h.inSession(sess.ID, testBrowser, "prompt", "consent select_account"))
	// Without it the session still answers.
	wantCode(t)(h.inSession(sess.ID, testBrowser))
}

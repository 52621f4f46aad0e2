package oidc

import (
	"fmt"
	"time"
)

// A grant "optionally until a date" (issue 24): the client may ask, with
// requested_actor_until, that the agent's grant end before the longest a grant
// lives here (refresh_token_ttl, the default). The grant stores its end, the
// jwt-bearer grant refuses after it, and no agent token outlives it.

// RequestedActorUntilParam is the authorization request parameter that ends the
// grant requested_actor asks for at a date: an RFC 3339 date-time
// ("2026-12-31T18:00:00Z", or with an offset), in the future and at most the
// longest a grant lives ahead.
const RequestedActorUntilParam = "requested_actor_until"

// maxActorUntilLen bounds requested_actor_until (an RFC 3339 date-time with
// nanoseconds and an offset is 35 bytes).
const maxActorUntilLen = 64

// checkActorUntil reads requested_actor_until of an authorization request whose
// requested_actor is actor: the zero time when absent.
func (s *Service) checkActorUntil(raw, actor string) (time.Time, error) {
	if raw == "" {
		return time.Time{}, nil
	}
	if actor == "" {
		return time.Time{}, oauthError(ErrInvalidRequest, "%s needs %s", RequestedActorUntilParam, RequestedActorParam)
	}
	if len(raw) > maxActorUntilLen {
		raw = "" // refused below, without parsing what is too long
	}
	t, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		return time.Time{}, oauthError(ErrInvalidRequest, "%s must be an RFC 3339 date-time, such as 2026-12-31T18:00:00Z", RequestedActorUntilParam)
	}
	now := s.now()
	if !t.After(now) {
		return time.Time{}, oauthError(ErrInvalidRequest, "%s is in the past", RequestedActorUntilParam)
	}
	if t.After(now.Add(s.actorGrantTTL())) {
		return time.Time{}, oauthError(ErrInvalidRequest, "%s is more than %s ahead, the longest an agent may act for a person here",
			RequestedActorUntilParam, days(s.actorGrantTTL()))
	}
	return t.UTC(), nil
}

// days says d in days when it is a whole number of them ("90 days"), else as a
// duration.
func days(d time.Duration) string {
	const day = 24 * time.Hour
	if d >= day && d%day == 0 {
		return fmt.Sprintf("%d days", d/day)
	}
	return d.String()
}

// actorGrantEnd is when the grant ar asks for ends if consented at now: its
// requested_actor_until, or the longest a grant lives, whichever comes first.
func (s *Service) actorGrantEnd(ar *AuthRequest, now time.Time) time.Time {
	end := now.Add(s.actorGrantTTL()).UTC()
	if !ar.ActorUntil.IsZero() && ar.ActorUntil.Before(end) {
		return ar.ActorUntil
	}
	return end
}

// ActorGrantEnd is when the grant ar asks for would end if the person consented
// now (the login page names it); the zero time for a plain login.
func (s *Service) ActorGrantEnd(ar *AuthRequest) time.Time {
	if ar.RequestedActor == "" {
		return time.Time{}
	}
	return s.actorGrantEnd(ar, s.now())
}

// errActorUntilPassed answers a login whose requested_actor_until passed while
// the person was signing in.
const errActorUntilPassed = "requested_actor_until passed before the person signed in"

// errActorGrantEnded refuses a token to an agent whose grant has reached its end.
var errActorGrantEnded = oauthError(ErrInvalidGrant, "the agent's grant to act for its person at this client has ended")

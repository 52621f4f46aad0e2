package palm

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/palmgate/palmgate/core/fault"
)

// Wire codes of a busy refusal: the global cap, and a network's.
const (
	CodeTooManyPending            = "too_many_pending_requests"
	CodeTooManyPendingFromNetwork = "too_many_pending_from_network"
)

// Busy refuses a new challenge of purpose p while it is at its cap of unfinished
// challenges (Unavailable: 503 at the edge), or while the client's network is at
// its own share of that cap (TooMany: 429); either way with RetryAfter, the time
// until the oldest challenge counted against the cap lapses (its record's lifetime
// ends), at least a second.
func Busy(p Purpose, network string, retry time.Duration) *fault.Error {
	retry = max(retry, time.Second)
	if network != "" {
		return &fault.Error{Class: fault.TooMany, Code: CodeTooManyPendingFromNetwork, RetryAfter: retry,
			Message: fmt.Sprintf("too many unfinished %s requests from this network; retry later", p)}
	}
	return &fault.Error{Class: fault.Unavailable, Code: CodeTooManyPending, RetryAfter: retry,
		Message: fmt.Sprintf("too many unfinished %s requests; retry later", p)}
}

// Network is the network a client address is counted under by the per-network
// caps: an IPv4 address's /24, an IPv6 address's /48 (a site's allocation; an
// address given as the edge's /64 prefix, "2001:db8:1:2::/64", counts the same).
// Anything else is its own network.
func Network(address string) string {
	ip := net.ParseIP(address)
	if ip == nil {
		if prefix, _, err := net.ParseCIDR(address); err == nil {
			ip = prefix
		}
	}
	switch {
	case ip == nil:
		return address
	case ip.To4() != nil:
		return ip.To4().Mask(net.CIDRMask(24, 32)).String() + "/24"
	default:
		return ip.Mask(net.CIDRMask(48, 128)).String() + "/48"
	}
}

// pendingCaps bounds, per purpose, how many challenges this instance created within
// the time their records can live unfinished (the request's lifetime plus Grace),
// and, beneath that, how many of them one client network (Network) created. Every
// such record may still be on disk, so the global cap bounds the disk a flood of
// unauthenticated requests can fill, whatever its sources; the per-network cap
// makes filling it take many networks, so one network cannot switch logins off for
// everyone. The counts live in this process: with several instances the bound is
// the sum of their caps, and a restart starts them afresh. They never make one
// instance accept what another refused, since they only refuse.
//
// Memory: a counted challenge is one entry (its lapse time and network) until it
// lapses, so at most the global cap of entries per purpose (a few MB at 50,000);
// a network with nothing counted is forgotten. A per-network cap needs a global
// one (the App refuses it alone).
type pendingCaps struct {
	mu     sync.Mutex
	limits map[Purpose]int
	perNet map[Purpose]int
	counts map[Purpose]*pendingCount
}

// pendingCount is what one purpose has counted: every challenge's lapse time with
// its network, oldest first, and each network's lapse times, oldest first.
type pendingCount struct {
	all  []lapse
	nets map[string][]time.Time
}

type lapse struct {
	at      time.Time
	network string
}

func newPendingCaps(limits, perNetwork map[Purpose]int) *pendingCaps {
	return &pendingCaps{limits: limits, perNet: perNetwork, counts: map[Purpose]*pendingCount{}}
}

// take counts a new challenge of purpose p from client address (the edge's
// address key; "" counts it under no network) at now, whose record can live
// span, and returns its entry (nil when p has no cap), or returns a busy fault
// (Unavailable or TooMany, with RetryAfter) when the global cap or the address's
// network's cap is reached.
func (c *pendingCaps) take(p Purpose, address string, now time.Time, span time.Duration) (*lapse, error) {
	if c == nil || c.limits[p] <= 0 {
		return nil, nil
	}
	limit, perNet := c.limits[p], c.perNet[p]
	network := ""
	if address != "" && perNet > 0 {
		network = Network(address)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.counts[p]
	if w == nil {
		w = &pendingCount{nets: map[string][]time.Time{}}
		c.counts[p] = w
	}
	w.prune(now)
	if network != "" {
		if mine := w.nets[network]; len(mine) >= perNet {
			retry := mine[0].Sub(now)
			if len(w.all) >= limit { // it must wait for the global cap too
				retry = max(retry, w.all[0].at.Sub(now))
			}
			return nil, Busy(p, network, retry)
		}
	}
	if len(w.all) >= limit {
		return nil, Busy(p, "", w.all[0].at.Sub(now))
	}
	at := now.Add(span)
	w.all = append(w.all, lapse{at: at, network: network})
	if network != "" {
		w.nets[network] = append(w.nets[network], at)
	}
	return &lapse{at: at, network: network}, nil
}

// give takes back one entry equal to l that take counted for purpose p (nothing
// if it has lapsed meanwhile). Entries with the same lapse time and network are
// alike, so any one of them goes; the order of the others is kept.
func (c *pendingCaps) give(p Purpose, l *lapse) {
	if c == nil || l == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.counts[p]
	if w == nil {
		return
	}
	// The newest entries are last: a refused request gives its place back at once.
	found := false
	for i := len(w.all) - 1; i >= 0 && !found; i-- {
		if found = w.all[i].network == l.network && w.all[i].at.Equal(l.at); found {
			w.all = append(w.all[:i], w.all[i+1:]...)
		}
	}
	if !found || l.network == "" {
		return // lapsed and pruned already, or counted under no network
	}
	mine := w.nets[l.network]
	for i := len(mine) - 1; i >= 0; i-- {
		if mine[i].Equal(l.at) {
			mine = append(mine[:i], mine[i+1:]...)
			break
		}
	}
	if len(mine) == 0 {
		delete(w.nets, l.network)
	} else {
		w.nets[l.network] = mine
	}
}

// prune forgets the challenges lapsed at now, and the networks left with none.
// Entries join in the same order in all and in their network's list, so the
// oldest of all is the oldest of its network.
func (w *pendingCount) prune(now time.Time) {
	for len(w.all) > 0 && !w.all[0].at.After(now) {
		if n := w.all[0].network; n != "" {
			if rest := w.nets[n][1:]; len(rest) > 0 {
				w.nets[n] = rest
			} else {
				delete(w.nets, n)
			}
		}
		w.all[0] = lapse{}
		w.all = w.all[1:]
	}
}

// Pending is one purpose's count of unfinished challenges against its cap.
type Pending struct {
	Purpose Purpose
	// Count is how many challenges of the purpose this instance created within
	// the time their records can live unfinished (their lifetime plus Grace), as
	// the cap counts them: a finished challenge still counts until then.
	Count int
	// Limit is the cap (MaxPending of the purpose).
	Limit int
}

// PendingStats returns, for each purpose with a cap, the count of its
// challenges against it at the current time. A purpose without a cap is not
// counted, and not listed.
func (s *Service) PendingStats() []Pending {
	return s.pending.stats(s.now())
}

// stats returns each capped purpose's count at now, in the order of Purposes.
func (c *pendingCaps) stats(now time.Time) []Pending {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Pending
	for _, p := range []Purpose{PurposeLogin, PurposeAgentRegistration} {
		limit := c.limits[p]
		if limit <= 0 {
			continue
		}
		n := 0
		if w := c.counts[p]; w != nil {
			w.prune(now)
			n = len(w.all)
		}
		out = append(out, Pending{Purpose: p, Count: n, Limit: limit})
	}
	return out
}

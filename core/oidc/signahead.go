package oidc

import (
	"runtime"
	"sync"
	"time"
)

// Signing ahead.
//
// A code exchange commits the code's use and the grant, a refresh the grant's
// new refresh token id, the jwt-bearer grant its assertion's jti (one synced
// commit each), then answers tokens whose content that transaction decided.
// Signing them only after the commit makes the request wait for the disk and
// then for the signatures, one after the other, and leaves the cores idle while
// the concurrent requests all wait for the disk. So the transaction's fn starts
// the signing as its last step, on another goroutine (one of a few long-lived
// signers, signerPool), and the request waits for the commit and the signatures
// together.
//
// Nothing signed ahead is seen before its transaction commits: the tokens stay
// in the signing until answer is called, which each of the three does only
// after Update returned nil, and the access token is remembered by the
// bearer cache only then. A run of fn that is not the one committed (a group
// that ran again, a conflict) leaves its signing behind unanswered, and the
// run after it starts its own; at worst, a retried request signs twice.

// signing is one set of tokens being signed ahead of a commit.
type signing struct {
	s    *Service
	done chan struct{}
	resp *TokenResponse
	// access is the access token's claims, for the bearer cache.
	access *AccessClaims
	err    error
}

// signAhead starts signing the tokens of an exchange or a refresh (sign) on a
// goroutine of its own.
func (s *Service) signAhead(cl *client, grantID, clientID, humanID string, scopes []string, resource string, authTime time.Time, nonce, refreshJTI string, refreshExp time.Time) *signing {
	return s.startSigning(func() (*TokenResponse, *AccessClaims, error) {
		return s.sign(cl, grantID, clientID, humanID, scopes, resource, authTime, nonce, refreshJTI, refreshExp)
	})
}

// signActorAhead starts signing the access token of an agent acting for its
// human under grant g (signActor) on a goroutine of its own. fn must not change
// g once it has called this.
func (s *Service) signActorAhead(cl *client, g *ActorGrant, scopes []string) *signing {
	return s.startSigning(func() (*TokenResponse, *AccessClaims, error) { return s.signActor(cl, g, scopes) })
}

// startSigning has a signer run sign; sign must use only values it was given,
// never the transaction.
func (s *Service) startSigning(sign func() (*TokenResponse, *AccessClaims, error)) *signing {
	sig := &signing{s: s, done: make(chan struct{})}
	signers.run(func() {
		defer close(sig.done)
		sig.resp, sig.access, sig.err = sign()
	})
	return sig
}

// signQueue is how many signings may wait for a signer before more start
// goroutines of their own.
const signQueue = 256

// signers are the goroutines that sign ahead, as many as Go runs at once
// (GOMAXPROCS when first used), for every Service of the process: signing is
// CPU work and nothing else. A goroutine of its own per exchange, as before, had
// up to as many signings as requests take turns on the cores, each on a new
// stack that ECDSA's signing grew. On long-lived signers goal 3 rose by
// 0.01-0.03 in paired runs, palmgate's share of its ceiling from 0.92-0.93 to
// 0.95-0.96 (docs/PERFORMANCE.md, 2026-11-27).
var signers = signerPool{jobs: make(chan func(), signQueue)}

type signerPool struct {
	start sync.Once
	jobs  chan func()
}

// run queues job for a signer, or, when the queue is full, runs it on a
// goroutine of its own: it never waits, since its caller is a transaction's fn,
// which may hold a group commit.
func (p *signerPool) run(job func()) {
	p.start.Do(func() {
		for range runtime.GOMAXPROCS(0) {
			go func() {
				for job := range p.jobs {
					job()
				}
			}()
		}
	})
	select {
	case p.jobs <- job:
	default:
		go job()
	}
}

// answer waits for the tokens and remembers the access token (this instance just
// signed it: its first use costs no signature check). Call it only once the
// transaction that started the signing has committed.
func (sig *signing) answer() (*TokenResponse, error) {
	<-sig.done
	if sig.err != nil {
		return nil, sig.err
	}
	sig.s.access.Remember(sig.resp.AccessToken, sig.access)
	return sig.resp, nil
}

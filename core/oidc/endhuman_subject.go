package oidc

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"

	"github.com/palmgate/palmgate/core/fault"
	"github.com/palmgate/palmgate/storage"
)

// A relying party's support desk knows a person only by the pairwise `sub` its
// client received. The operator turns it into the humanId the end of a person
// takes (HumanBySubject), then ends them by humanId: two steps, so that the audit
// entry, and the operator, see whom they end. palmgate cannot reverse a pairwise
// sub (that is what makes it pairwise): it computes the sub, at the client's
// sector, of each person who holds something of that client (a grant, a consent,
// an agent grant) and compares. A person who holds nothing of it any more has
// nothing of it to end.

// ErrSubjectNotFound answers HumanBySubject when no person of the client has sub.
var ErrSubjectNotFound = &fault.Error{Class: fault.NotFound, Code: "not_found",
	Message: "no person holding a grant, consent or agent grant of this client has this sub"}

// HumanBySubject returns the humanId whose pairwise sub at client clientID is sub.
func (s *Service) HumanBySubject(ctx context.Context, clientID, sub string) (string, error) {
	if clientID == "" || sub == "" {
		return "", &fault.Error{Class: fault.Invalid, Code: fault.CodeInvalidField,
			Message: "client_id and sub are both required", Details: map[string]any{"field": "sub"}}
	}
	cl, err := s.clients.lookup(ctx, clientID)
	if err != nil {
		return "", err
	}
	if cl == nil {
		return "", &fault.Error{Class: fault.NotFound, Code: "not_found", Message: "unknown client_id"}
	}
	humans := map[string]bool{}
	suffix := []byte("/" + clientID)
	err = s.store.View(ctx, func(txn storage.Txn) error {
		clear(humans)
		if err := txn.Iterate(grantPrefix(), func(_, v []byte) (bool, error) {
			var g grant
			if json.Unmarshal(v, &g) == nil && g.ClientID == clientID {
				humans[g.HumanID] = true
			}
			return true, nil
		}); err != nil {
			return err
		}
		cp := consentPrefix()
		if err := txn.IterateKeys(cp, func(k []byte) (bool, error) {
			if rest, ok := bytes.CutSuffix(k[len(cp):], suffix); ok {
				humans[string(rest)] = true
			}
			return true, nil
		}); err != nil {
			return err
		}
		return txn.Iterate(actorGrantPrefix(), func(_, v []byte) (bool, error) {
			var g ActorGrant
			if json.Unmarshal(v, &g) == nil && g.ClientID == clientID {
				humans[g.HumanID] = true
			}
			return true, nil
		})
	})
	if err != nil {
		return "", fmt.Errorf("finding the person of a sub: %w", err)
	}
	for h := range humans {
		if subtle.ConstantTimeCompare([]byte(PairwiseSubject(s.pairwiseSecret, cl.sector, h)), []byte(sub)) == 1 {
			return h, nil
		}
	}
	return "", ErrSubjectNotFound
}

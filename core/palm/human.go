package palm

import (
	"errors"

	"github.com/google/uuid"

	"github.com/palmgate/palmgate/storage"
)

// humanFor returns the human behind the palm subject an attestor named, creating one
// with a random id on first sight. Login and the agent registry share humans.
func (s *Service) humanFor(txn storage.Txn, attestor, subject string) (string, error) {
	key := humanKey(attestor, subject)
	id, err := txn.Get(key)
	if err == nil {
		return string(id), nil
	}
	if !errors.Is(err, storage.ErrNotFound) {
		return "", err
	}
	humanID := uuid.NewString()
	return humanID, txn.Set(key, []byte(humanID), 0)
}

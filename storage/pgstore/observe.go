package pgstore

// What the store reports to Config.Observer: the duration of every Update (its
// retries and its wait for a group included), View and ReadKey; each attempt run
// again after a serialization failure or deadlock (not after a lost connection);
// the size of each group (group.go), one for an Update that found none to share
// its turn with; and each member that left a group to run alone, with why.

// conflictRetry reports to the observer, if any, that an Update runs again after
// a serialization failure or a deadlock.
func (s *Store) conflictRetry() {
	if s.obs != nil {
		s.obs.ConflictRetry()
	}
}

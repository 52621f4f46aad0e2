package edge

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"

	"github.com/palmgate/palmgate/core/agent"
	"github.com/palmgate/palmgate/core/fault"
)

// maxCachedEncodings bounds the leaderboard encodings kept per fill (one per limit
// asked), so that asking for every limit cannot fill memory.
const maxCachedEncodings = 8

// boardEncodings keeps the JSON of the leaderboard as answered, per limit, for the
// current fill of core/agent's leaderboard cache (agent.Service.LeaderboardFill):
// a repeated request costs no encoding.
type boardEncodings struct {
	mu    sync.Mutex
	fill  uint64
	bytes map[int][]byte
}

// encode returns the answer's body for entries of fill at limit.
func (c *boardEncodings) encode(entries []agent.LeaderboardEntry, fill uint64, limit int) ([]byte, error) {
	c.mu.Lock()
	if fill != 0 && fill == c.fill {
		if b, ok := c.bytes[limit]; ok {
			c.mu.Unlock()
			return b, nil
		}
	}
	c.mu.Unlock()
	b, err := json.Marshal(entries)
	if err != nil {
		return nil, err
	}
	b = append(b, '\n')
	if fill == 0 {
		return b, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if fill > c.fill {
		c.fill, c.bytes = fill, map[int][]byte{}
	}
	if fill == c.fill && len(c.bytes) < maxCachedEncodings {
		c.bytes[limit] = b
	}
	return b, nil
}

func (s *Server) handleLeaderboard(w http.ResponseWriter, r *http.Request) {
	limit := agent.DefaultLeaderboardLimit
	if q := r.URL.Query().Get("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > agent.MaxLeaderboardLimit {
			s.writeError(w, r, fault.Field(fault.Invalid, fault.CodeInvalidField, "limit",
				"limit must be an integer from 1 to %d", agent.MaxLeaderboardLimit))
			return
		}
		limit = n
	}
	entries, fill, err := s.agents.LeaderboardFill(r.Context(), limit)
	if err == nil && entries == nil {
		entries = []agent.LeaderboardEntry{}
	}
	var body []byte
	if err == nil {
		body, err = s.board.encode(entries, fill, limit)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

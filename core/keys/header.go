package keys

import (
	"encoding/base64"
	"encoding/json"
	"sync"
)

// headerSegmentsMax bounds the headers a Set remembers: an algorithm, a key id
// and a typ each, a few per active key. When full (after many rotations), it
// starts again empty, so that a new key's headers are always remembered.
const headerSegmentsMax = 64

// headerSegments remembers the first segment of the tokens Sign makes, the
// base64url of the JOSE header {"alg", "kid", "typ"}, exactly as golang-jwt's
// Token.SigningString encodes it (json.Marshal of the header map, keys sorted):
// the same three values give the same bytes, so encoding them once spares each
// token a map and its reflective encoding (15 allocations of a token's 97).
type headerSegments struct {
	mu sync.RWMutex
	m  map[headerID]string
}

type headerID struct{ alg, kid, typ string }

// segment returns the encoded header of a token of alg, signed by the key kid,
// of type typ.
func (h *headerSegments) segment(alg, kid, typ string) (string, error) {
	id := headerID{alg, kid, typ}
	h.mu.RLock()
	seg, ok := h.m[id]
	h.mu.RUnlock()
	if ok {
		return seg, nil
	}
	b, err := json.Marshal(map[string]any{"alg": alg, "kid": kid, "typ": typ})
	if err != nil {
		return "", err
	}
	seg = base64.RawURLEncoding.EncodeToString(b)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = make(map[headerID]string)
	}
	if len(h.m) >= headerSegmentsMax {
		clear(h.m) // rotated keys' headers, mostly: the active ones come back at once
	}
	h.m[id] = seg
	return seg, nil
}

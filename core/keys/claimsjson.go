package keys

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Claims that encode themselves.
//
// In a profile of the code exchange under load, encoding/json's reflection over
// the claims of its three tokens cost about 50 µs of CPU: a tenth of an ES256
// exchange. Sign therefore lets claims append their own JSON (ClaimsAppender),
// and ClaimsJSON appends the shapes palmgate's claims use by hand, byte for byte
// as json.Marshal writes them. It gives up on any string it would have to
// escape, and on golang-jwt's non-default encodings; End then encodes the claims
// with json.Marshal instead. It never escapes anything, so it cannot escape
// anything wrongly.

// ClaimsAppender is claims that append their JSON encoding to b, the bytes
// json.Marshal would return for them.
type ClaimsAppender interface {
	jwt.Claims
	AppendClaims(b []byte) ([]byte, error)
}

// ClaimsJSON is one JSON object of claims being appended: members in the order
// of their struct fields, omitempty as encoding/json applies it.
type ClaimsJSON struct {
	b     []byte
	start int
	ok    bool
}

// NewClaimsJSON starts an object at the end of b (with room for a token's claims).
func NewClaimsJSON(b []byte) ClaimsJSON {
	start := len(b)
	b = slices.Grow(b, 400)
	return ClaimsJSON{b: append(b, '{'), start: start, ok: true}
}

// End closes the object and returns b with it appended. If a value was not one
// ClaimsJSON writes as json.Marshal does, it appends json.Marshal(claims())
// instead: claims returns the value whose members were appended (a function, so
// that the claims are copied to the heap only then).
func (c *ClaimsJSON) End(claims func() any) ([]byte, error) {
	if c.ok {
		return append(c.b, '}'), nil
	}
	j, err := json.Marshal(claims())
	return append(c.b[:c.start], j...), err
}

func (c *ClaimsJSON) key(name string) {
	if c.b[len(c.b)-1] != '{' {
		c.b = append(c.b, ',')
	}
	c.b = append(c.b, '"')
	c.b = append(c.b, name...)
	c.b = append(c.b, `":`...)
}

func (c *ClaimsJSON) quoted(v string) {
	if !Verbatim(v) {
		c.ok = false
		return
	}
	c.b = append(c.b, '"')
	c.b = append(c.b, v...)
	c.b = append(c.b, '"')
}

// String appends a string member (none for "" when omitEmpty).
func (c *ClaimsJSON) String(name, v string, omitEmpty bool) {
	if v == "" && omitEmpty {
		return
	}
	c.key(name)
	c.quoted(v)
}

// Int appends an integer member (none for 0 when omitEmpty).
func (c *ClaimsJSON) Int(name string, v int64, omitEmpty bool) {
	if v == 0 && omitEmpty {
		return
	}
	c.key(name)
	c.b = strconv.AppendInt(c.b, v, 10)
}

// Strings appends an array of strings (null for nil; none for an empty one when
// omitEmpty).
func (c *ClaimsJSON) Strings(name string, v []string, omitEmpty bool) {
	if len(v) == 0 && omitEmpty {
		return
	}
	c.key(name)
	if v == nil {
		c.b = append(c.b, "null"...)
		return
	}
	c.b = append(c.b, '[')
	for i, s := range v {
		if i > 0 {
			c.b = append(c.b, ',')
		}
		c.quoted(s)
	}
	c.b = append(c.b, ']')
}

// Date appends a NumericDate member, omitted when nil (every date of
// RegisteredClaims is omitempty). Only whole seconds, jwt.TimePrecision's
// default, are written by hand.
func (c *ClaimsJSON) Date(name string, d *jwt.NumericDate) {
	if d == nil {
		return
	}
	if jwt.TimePrecision != time.Second {
		c.ok = false
		return
	}
	c.key(name)
	c.b = strconv.AppendInt(c.b, d.Unix(), 10)
}

// Object appends an object member whose members members appends.
func (c *ClaimsJSON) Object(name string, members func(*ClaimsJSON)) {
	c.key(name)
	c.b = append(c.b, '{')
	members(c)
	c.b = append(c.b, '}')
}

// Registered appends the members of jwt.RegisteredClaims, embedded first in every
// claims struct of palmgate's.
func (c *ClaimsJSON) Registered(r *jwt.RegisteredClaims) {
	c.String("iss", r.Issuer, true)
	c.String("sub", r.Subject, true)
	switch {
	case len(r.Audience) == 1 && !jwt.MarshalSingleStringAsArray:
		c.String("aud", r.Audience[0], false)
	default:
		c.Strings("aud", r.Audience, true)
	}
	c.Date("exp", r.ExpiresAt)
	c.Date("nbf", r.NotBefore)
	c.Date("iat", r.IssuedAt)
	c.String("jti", r.ID, true)
}

// Verbatim reports whether encoding/json writes s between its quotes as it is:
// printable ASCII other than `"`, `\` and the `<`, `>` and `&` it escapes for HTML.
// It reads eight bytes at a time, with the tests of "Bit Twiddling Hacks" for a
// byte less than, more than or equal to n, each exact as to whether there is one.
func Verbatim(s string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	eq := func(x, c uint64) uint64 { v := x ^ c*ones; return (v - ones) &^ v }
	for ; len(s) >= 8; s = s[8:] {
		w := s[:8]
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		less, more := (x-0x20*ones)&^x, (x+ones)|x // below 0x20, above 0x7e
		// '"' (0x22) and '&' (0x26) differ in bit 2 only, '<' (0x3c) and '>' (0x3e)
		// in bit 1 only: setting that bit tests both at once.
		quoteAmp, angle, backslash := eq(x|0x04*ones, '&'), eq(x|0x02*ones, '>'), eq(x, '\\')
		if (less|more|quoteAmp|angle|backslash)&highs != 0 {
			return false
		}
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

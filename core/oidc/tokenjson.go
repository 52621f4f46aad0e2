package oidc

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
)

// AppendJSON appends r as json.NewEncoder(w).Encode(r) writes it, the newline
// included. Tokens, scopes and the token type are made of characters JSON copies
// as they are: their fields are appended by hand, without the reflection of
// encoding/json (a few µs of each code exchange). A string with any other
// character is left to encoding/json, which escapes it.
func (r *TokenResponse) AppendJSON(b []byte) []byte {
	if !verbatim(r.AccessToken) || !verbatim(r.TokenType) || !verbatim(r.Scope) ||
		!verbatim(r.IDToken) || !verbatim(r.RefreshToken) {
		buf := bytes.NewBuffer(b)
		_ = json.NewEncoder(buf).Encode(r) // strings and integers: it cannot fail
		return buf.Bytes()
	}
	b = slices.Grow(b, len(r.AccessToken)+len(r.TokenType)+len(r.Scope)+len(r.IDToken)+len(r.RefreshToken)+170) // and the keys, quotes and numbers
	b = append(b, `{"access_token":"`...)
	b = append(b, r.AccessToken...)
	b = append(b, `","token_type":"`...)
	b = append(b, r.TokenType...)
	b = append(b, `","expires_in":`...)
	b = strconv.AppendInt(b, r.ExpiresIn, 10)
	b = append(b, `,"scope":"`...)
	b = append(b, r.Scope...)
	b = append(b, '"')
	if r.IDToken != "" {
		b = append(b, `,"id_token":"`...)
		b = append(b, r.IDToken...)
		b = append(b, '"')
	}
	if r.RefreshToken != "" {
		b = append(b, `,"refresh_token":"`...)
		b = append(b, r.RefreshToken...)
		b = append(b, '"')
	}
	if r.RefreshTokenExpiresIn != 0 {
		b = append(b, `,"refresh_token_expires_in":`...)
		b = strconv.AppendInt(b, r.RefreshTokenExpiresIn, 10)
	}
	return append(b, "}\n"...)
}

// verbatim reports whether encoding/json writes s between its quotes as it is:
// printable ASCII other than `"`, `\` and the `<`, `>` and `&` it escapes for HTML.
// It reads eight bytes at a time, with the tests of "Bit Twiddling Hacks" for a
// byte less than, more than or equal to n, each exact as to whether there is one.
func verbatim(s string) bool {
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

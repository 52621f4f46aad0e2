package oidc

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/palmgate/palmgate/core/keys"
)

// AppendJSON appends r as json.NewEncoder(w).Encode(r) writes it, the newline
// included. Tokens, scopes and the token type are made of characters JSON copies
// as they are: their fields are appended by hand, without the reflection of
// encoding/json (a few µs of each code exchange). A string with any other
// character is left to encoding/json, which escapes it.
func (r *TokenResponse) AppendJSON(b []byte) []byte {
	if !keys.Verbatim(r.AccessToken) || !keys.Verbatim(r.TokenType) || !keys.Verbatim(r.Scope) ||
		!keys.Verbatim(r.IDToken) || !keys.Verbatim(r.RefreshToken) {
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

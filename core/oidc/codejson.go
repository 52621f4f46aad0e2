package oidc

import (
	"encoding/json"
	"time"
)

// decodeCode decodes a stored code record as json.Unmarshal does. The records
// putCode and used write (compact, each key spelt as its tag, strings of
// printable ASCII without escapes) are read by hand: this runs in the exchange's
// transaction. Anything else, a record of another writer included, is left to
// encoding/json.
func decodeCode(b []byte) (codeRecord, error) {
	if rec, ok := scanCode(b); ok {
		return rec, nil
	}
	var rec codeRecord // apart: its address escapes to encoding/json
	err := json.Unmarshal(b, &rec)
	return rec, err
}

// scanCode reads b if it has the shape decodeCode reads by hand (ok), and stops
// at the first byte that differs.
func scanCode(b []byte) (rec codeRecord, ok bool) {
	s, i := string(b), 0 // one copy, of which the strings are parts
	next := func(c byte) bool {
		if i < len(s) && s[i] == c {
			i++
			return true
		}
		return false
	}
	str := func(v *string) bool {
		if !next('"') {
			return false
		}
		j := i
		for j < len(s) && s[j] >= 0x20 && s[j] <= 0x7e && s[j] != '"' && s[j] != '\\' {
			j++
		}
		*v, i = s[i:j], j
		return next('"')
	}
	strs := func(v *[]string) bool {
		if !next('[') {
			return false
		}
		*v = []string{} // not nil: encoding/json decodes [] so
		for n := 0; !next(']'); n++ {
			var e string
			if n > 0 && !next(',') || !str(&e) {
				return false
			}
			*v = append(*v, e)
		}
		return true
	}
	at := func(v *time.Time) bool { // by UnmarshalJSON, as encoding/json does
		start := i
		return str(new(string)) && v.UnmarshalJSON(b[start:i]) == nil
	}
	if !next('{') {
		return rec, false
	}
	for n := 0; !next('}'); n++ {
		var key string
		if n > 0 && !next(',') || !str(&key) || !next(':') {
			return rec, false
		}
		switch key {
		case "clientId":
			ok = str(&rec.ClientID)
		case "redirectUri":
			ok = str(&rec.RedirectURI)
		case "scopes":
			ok = strs(&rec.Scopes)
		case "resource":
			ok = str(&rec.Resource)
		case "nonce":
			ok = str(&rec.Nonce)
		case "codeChallenge":
			ok = str(&rec.CodeChallenge)
		case "humanId":
			ok = str(&rec.HumanID)
		case "authTime":
			ok = at(&rec.AuthTime)
		case "expiresAt":
			ok = at(&rec.ExpiresAt)
		case "grantId":
			ok = str(&rec.GrantID)
		case "plannedGrantId":
			ok = str(&rec.PlannedGrant)
		case "sessionHash":
			ok = str(&rec.Session)
		case "sessionEnd":
			ok = at(&rec.SessionEnd)
		default: // another spelling, which encoding/json may match to a field
			ok = false
		}
		if !ok {
			return rec, false
		}
	}
	return rec, i == len(s)
}

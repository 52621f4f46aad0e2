// Package records is the domain's key convention, the one place that knows it: a
// record's key starts with its package and its kind ("agent/d/<deviceId>",
// "oidc/code/<hash>"), each package building its keys in its keys.go. Storage
// knows no key names; operators' counts and the migrate command's comparison group
// records by Kind.
package records

import "bytes"

// Kind is the kind of the record under key: the first two slash-separated segments
// ("agent/d", "oidc/code"), or the whole key when it has fewer.
func Kind(key []byte) string {
	first := bytes.IndexByte(key, '/')
	if first < 0 {
		return string(key)
	}
	second := bytes.IndexByte(key[first+1:], '/')
	if second < 0 {
		return string(key[:first])
	}
	return string(key[:first+1+second])
}

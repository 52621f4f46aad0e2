package oidc

import (
	"net/url"
	"strings"
)

// withParams is uri, a registered redirect URI (validated at configuration: no
// fragment), with params added to its query. RFC 6749 3.1.2: the registered query
// is retained as it is, byte for byte (re-encoding it through url.Values dropped
// the pairs Go's parser refuses, such as those with a semicolon); only a pair
// named as one of params is replaced, so that a response parameter is never
// doubled.
func withParams(uri string, params url.Values) string {
	if len(params) == 0 {
		return uri
	}
	base, query, _ := strings.Cut(uri, "?")
	var kept []string
	for _, pair := range strings.Split(query, "&") {
		key, _, _ := strings.Cut(pair, "=")
		if name, err := url.QueryUnescape(key); pair == "" || err == nil && params.Has(name) {
			continue
		}
		kept = append(kept, pair)
	}
	return base + "?" + strings.Join(append(kept, params.Encode()), "&")
}

package storage_test

import "strings"

// firstTwo is the kind rule of the tests: the first two slash-separated segments of
// the key (palmgate's, core/records.Kind, which storage does not import).
func firstTwo(key []byte) string {
	parts := strings.SplitN(string(key), "/", 3)
	if len(parts) < 3 {
		return parts[0]
	}
	return parts[0] + "/" + parts[1]
}

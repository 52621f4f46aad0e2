package edge

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// maxBearerToken is the longest token bearerToken hands on (8 KiB).
const maxBearerToken = 8 << 10

// FuzzBearerHeader: bearerToken never panics; it reports ok only for
// `Bearer <token>` (scheme in any case, one space, then the token, possibly padded
// with spaces) with a token of 1 to 8 KiB that has no leading or trailing white
// space and is the header's own text; and every such header is accepted.
func FuzzBearerHeader(f *testing.F) {
	for _, h := range []string{"Bearer abc.def.ghi", "bearer  tok ", "Basic dXNlcjpwYXNz", "Bearer", "Bearer ", "BEARER\tx"} {
		f.Add(h)
	}

	f.Fuzz(func(t *testing.T, header string) {
		token, ok := bearerToken(header)

		// Independent of the implementation: what a well-formed header is.
		scheme, rest, hasSpace := strings.Cut(header, " ")
		isBearer := hasSpace && len(scheme) == len("Bearer") && strings.EqualFold(scheme, "Bearer")
		if !ok {
			canonical := strings.TrimFunc(rest, unicode.IsSpace)
			if isBearer && rest == canonical && rest != "" && len(rest) <= maxBearerToken {
				t.Fatalf("refused the well-formed header %q", header)
			}
			return
		}
		if !isBearer {
			t.Fatalf("accepted %q, whose scheme is not Bearer", header)
		}
		if token == "" || len(token) > maxBearerToken {
			t.Fatalf("accepted a token of %d bytes", len(token))
		}
		first, _ := utf8.DecodeRuneInString(token)
		last, _ := utf8.DecodeLastRuneInString(token)
		if unicode.IsSpace(first) || unicode.IsSpace(last) {
			t.Fatalf("token %q has leading or trailing white space", token)
		}
		if !strings.Contains(rest, token) || strings.TrimSpace(rest) != token {
			t.Fatalf("token %q is not the header's text after the scheme (%q)", token, rest)
		}
	})
}

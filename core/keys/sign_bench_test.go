package keys

import "testing"

// BenchmarkSign is one token of each kind a code exchange signs (ES256 access
// and refresh tokens, an ES256 ID token).
//
//	go test -run '^$' -bench BenchmarkSign -count 8 ./core/keys
func BenchmarkSign(b *testing.B) {
	s := openSet(&testing.T{}, openStore(&testing.T{}, b.TempDir()))
	claims := testClaims()
	b.ReportAllocs()
	for b.Loop() {
		for _, typ := range []string{"at+jwt", "JWT", "rt+jwt"} {
			if _, err := s.Sign(ES256, typ, claims); err != nil {
				b.Fatal(err)
			}
		}
	}
}

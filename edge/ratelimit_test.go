package edge

import (
	"net/http/httptest"
	"testing"
	"time"
)

// TestAddressKey: an IPv6 client is its /64 (a subscriber gets a whole /64, so
// per-address limits by full address would not limit it); IPv4 stays as it is.
func TestAddressKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7":             "192.0.2.7",
		"2001:db8:1:2:3:4:5:6":  "2001:db8:1:2::/64",
		"2001:db8:1:2::ffff":    "2001:db8:1:2::/64",
		"2001:db8:1:3::1":       "2001:db8:1:3::/64",
		"::ffff:192.0.2.7":      "::ffff:192.0.2.7",
		"not an address at all": "not an address at all",
	} {
		if got := addressKey(in); got != want {
			t.Errorf("addressKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLimiterPerSlash64: two addresses of one IPv6 /64 share a bucket; another
// /64 has its own.
func TestLimiterPerSlash64(t *testing.T) {
	l := newLimiter(RateLimit{Requests: 2, Window: time.Hour}, nil)
	from := func(addr string) bool {
		r := httptest.NewRequest("POST", "/v1/agent/register/init", nil)
		r.RemoteAddr = addr
		return l.allow(r) == nil
	}
	if !from("[2001:db8:1:2::1]:1000") || !from("[2001:db8:1:2::2]:1000") {
		t.Fatal("the first two requests of the /64 were refused")
	}
	if from("[2001:db8:1:2:ffff::3]:1000") {
		t.Error("a third address of the same /64 got a fresh bucket")
	}
	if !from("[2001:db8:1:3::1]:1000") {
		t.Error("another /64 shares the first one's bucket")
	}
}

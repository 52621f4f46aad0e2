package edge

import (
	"testing"
	"time"
)

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Hour: "1h", 90 * time.Minute: "1h30m", 30 * time.Second: "30s", 10 * time.Minute: "10m",
		time.Hour + 30*time.Second: "1h0m30s", 300 * time.Millisecond: "300ms",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

package cachestat

import (
	"sync"
	"testing"
)

func TestCounter(t *testing.T) {
	var c Counter
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range 1000 {
				c.Record(i%4 != 0)
			}
		})
	}
	wg.Wait()
	if got, want := c.Stats("x"), (Stats{Cache: "x", Hits: 3000, Misses: 1000}); got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
	var none *Counter
	none.Hit()
	none.Miss()
	if got := none.Stats("y"); got != (Stats{Cache: "y"}) {
		t.Errorf("a nil Counter's Stats = %+v", got)
	}
}

package crtime

import (
	"sync"
	"testing"
	"time"
)

// Times given out at once, from one clock reading, are all distinct and
// never before it.
func TestUniqueGivesDistinctTimes(t *testing.T) {
	now := time.Now()
	const workers, each = 8, 1000
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := make([]int64, 0, each)
			for range each {
				got = append(got, Unique(now).UnixNano())
			}
			mu.Lock()
			defer mu.Unlock()
			for _, n := range got {
				if seen[n] || n < now.UnixNano() {
					t.Errorf("time %d given out twice or before %d", n, now.UnixNano())
				}
				seen[n] = true
			}
		}()
	}
	wg.Wait()
	if len(seen) != workers*each {
		t.Fatalf("%d distinct times, want %d", len(seen), workers*each)
	}
}

package linz

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/kelpfs/kelp/internal/testutil"
)

// keyTimes are the known moments of one key's life: its put acknowledged,
// its delete called and acknowledged (zero: not happened or not known).
type keyTimes struct {
	putAck, delCall, delAck time.Time
}

// TestS3ListAfterWrite: a listing (ListObjectsV2, every page) started after
// a PutObject was acknowledged shows the key unless a delete of it was
// called before the listing ended, and one started after a DeleteObject was
// acknowledged does not show it; under the same faults as the register
// tests. Writes whose outcome is unknown constrain nothing.
func TestS3ListAfterWrite(t *testing.T) {
	r := startRig(t)
	s := newS3KV("http://"+r.gateway.Addr(), "list")
	ctx := context.Background()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := s.c.CreateBucket(cctx, &s3.CreateBucketInput{Bucket: aws.String("list")}); err != nil {
		t.Fatal(err)
	}
	ops := opsWanted(t, 200)
	var mu sync.Mutex
	keys := map[string]*keyTimes{}
	var putErrs int
	var firstErr error
	const writers = 3
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < ops/writers/2; i++ {
				k := fmt.Sprintf("w%d/%04d", w, i)
				kt := &keyTimes{}
				mu.Lock()
				keys[k] = kt
				mu.Unlock()
				if err := s.Put(k, "v"); err != nil {
					mu.Lock()
					putErrs++
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				mu.Lock()
				kt.putAck = time.Now()
				mu.Unlock()
				if i%3 != 0 {
					continue
				}
				mu.Lock()
				kt.delCall = time.Now()
				mu.Unlock()
				if err := s.Delete(k); err == nil {
					mu.Lock()
					kt.delAck = time.Now()
					mu.Unlock()
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	type listing struct {
		call, ret time.Time
		seen      map[string]bool
	}
	var lists []listing
	var listErrs int
	list := func() (listing, error) {
		l := listing{call: time.Now(), seen: map[string]bool{}}
		lctx, lcancel := context.WithTimeout(ctx, 5*opTimeout)
		defer lcancel()
		p := s3.NewListObjectsV2Paginator(s.c, &s3.ListObjectsV2Input{Bucket: aws.String("list"), MaxKeys: aws.Int32(100)})
		for p.HasMorePages() {
			page, err := p.NextPage(lctx)
			if err != nil {
				return l, err
			}
			for _, o := range page.Contents {
				l.seen[*o.Key] = true
			}
		}
		l.ret = time.Now()
		return l, nil
	}
	listed := make(chan struct{})
	go func() {
		defer close(listed)
		for {
			select {
			case <-done:
				return
			default:
			}
			l, err := list()
			if err != nil {
				listErrs++
				continue
			}
			lists = append(lists, l)
		}
	}()
	count := r.faults(t, done, uint64(time.Now().UnixNano()), 150*time.Millisecond)
	<-listed
	// One listing after the faults ended (the bridges are resumed): under a
	// slow machine every listing above may have run before the first put
	// was acknowledged, or hung in a fault until the end.
	testutil.WaitFor(t, time.Minute, func() bool {
		l, err := list()
		if err == nil {
			lists = append(lists, l)
		}
		return err == nil
	}, "a listing after the faults ended")
	t.Logf("faults: %v", count)
	mu.Lock()
	defer mu.Unlock()
	checked := 0
	for _, l := range lists {
		for k, kt := range keys {
			mustShow := !kt.putAck.IsZero() && kt.putAck.Before(l.call) && (kt.delCall.IsZero() || kt.delCall.After(l.ret))
			mustHide := !kt.delAck.IsZero() && kt.delAck.Before(l.call)
			switch {
			case mustShow && !l.seen[k]:
				t.Errorf("listing at %v misses %s, acknowledged at %v", l.call, k, kt.putAck)
			case mustHide && l.seen[k]:
				t.Errorf("listing at %v shows %s, deleted at %v", l.call, k, kt.delAck)
			}
			if mustShow || mustHide {
				checked++
			}
		}
	}
	t.Logf("%d keys (%d puts failed, first: %v), %d listings (%d failed), %d key/listing pairs checked",
		len(keys), putErrs, firstErr, len(lists), listErrs, checked)
	if len(lists) == 0 || checked == 0 {
		t.Fatal("nothing was checked")
	}
}

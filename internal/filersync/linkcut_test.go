package filersync

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/testutil/bridge"
	"github.com/kelpfs/kelp/internal/testutil/netcut"
)

// TestSyncSurvivesLinkCut: the link to B's filer is cut while the sync runs
// and both sides keep changing; once it is back, the sync converges by
// itself, copying each changed file exactly once.
func TestSyncSurvivesLinkCut(t *testing.T) {
	a, b := startSite(t), startSite(t)
	link, err := bridge.New(b.GRPCAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { link.Close() })
	r := startSyncAt(t, a.GRPCAddr(), link.Addr(), 4)

	for i := range 10 {
		put(t, a, fmt.Sprintf("/l/a%d", i), data(fmt.Sprintf("a%d", i), 3000))
		put(t, b, fmt.Sprintf("/l/b%d", i), data(fmt.Sprintf("b%d", i), 3000))
	}
	waitConverged(t, r, a, b, time.Minute)
	before := copies(r)

	// The link goes silent, then every connection is cut; the sync's
	// reconnects find nothing there.
	accepted := link.Accepted()
	link.Blackhole()
	link.Drop()
	for i := 10; i < 20; i++ {
		put(t, a, fmt.Sprintf("/l/a%d", i), data(fmt.Sprintf("a%d", i), 5000))
		put(t, b, fmt.Sprintf("/l/b%d", i), data(fmt.Sprintf("b%d", i), 5000))
	}
	put(t, a, "/l/b1", []byte("b1 changed on a during the cut"))
	put(t, b, "/l/a2", []byte("a2 changed on b during the cut"))
	for link.Accepted() == accepted { // the sync tried to reach B during the cut
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
	link.Drop()
	link.Resume()

	took := waitConverged(t, r, a, b, 2*time.Minute)
	t.Logf("converged %v after the link came back", took.Round(time.Millisecond))
	if got := copies(r) - before; got != 22 {
		t.Errorf("after the cut %d files were copied, want 22 (20 new, 2 changed)", got)
	}
	if got := string(get(t, b, "/l/b1")); got != "b1 changed on a during the cut" {
		t.Errorf("/l/b1 on b = %q", got)
	}
	if got := string(get(t, a, "/l/a2")); got != "a2 changed on b during the cut" {
		t.Errorf("/l/a2 on a = %q", got)
	}
}

// TestSyncLinkCutMany is issue 12's check: files written on both sides,
// before the sync starts, while it runs and while the link between the
// sites is cut (the cut lands in the middle of the first run's tree
// comparison); deletes and overwrites on both sides during the cut. Once
// the link is back both trees are identical (names, sizes, SHA-256 of the
// content), no file was copied twice, and a restarted sync copies nothing.
// KELP_SYNC_FILES sets the files per side (default 500, so 1,000 in all;
// 5000 for the 10,000).
func TestSyncLinkCutMany(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	n := 500
	if v := os.Getenv("KELP_SYNC_FILES"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	q := n / 4
	a, _ := startSiteCluster(t)
	b, cb := startSiteCluster(t)

	// The link to B: its filer's gRPC through a bridge, its masters and
	// volume servers (the data path) through a network that can be cut.
	link, err := bridge.New(b.GRPCAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { link.Close() })
	nw := netcut.New()
	for _, m := range cb.Masters {
		nw.Add("b", m.Addr)
	}
	for _, v := range cb.Volume {
		nw.Add("b", v.Addr)
	}
	hc := client.NewHTTPClient()
	hc.Transport.(*http.Transport).DialContext = nw.ContextDialer("sync")
	cut := func() {
		link.Blackhole() // silent first: calls in flight hang
		nw.Isolate("sync")
		link.Drop() // then every connection is cut
	}
	heal := func() {
		nw.Heal()
		link.Drop() // connections opened into the blackhole
		link.Resume()
	}

	name := func(side string, i int) string { return fmt.Sprintf("/m/%s/d%d/f%d", side, i%20, i) }
	content := func(side string, i int) []byte { return data(side+strconv.Itoa(i), 100+i%2000) }
	writeMany := func(s *filerserver.Server, side string, from, to int) {
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := from + w; i < to; i += 8 {
					put(t, s, name(side, i), content(side, i))
				}
			}()
		}
		wg.Wait()
	}
	writeMany(a, "a", 0, q)
	writeMany(b, "b", 0, q)

	// The link is cut after A to B's tree comparison has compared a
	// quarter of A's files: it must resume there, not start over.
	var compared atomic.Int64
	var once sync.Once
	var copiedBeforeCut []string
	var mu sync.Mutex
	cutDone := make(chan struct{})
	t0 := time.Now()
	r := startSyncWith(t, Config{A: a.GRPCAddr(), B: link.Addr(), Workers: 8, HTTPClient: hc}, func(s *Syncer) {
		s.testCompared = func(d *direction, sp string) error {
			if d.src.Name != "a" || !strings.HasPrefix(sp, "/m/a/d") || !strings.Contains(sp, "/f") {
				return nil
			}
			mu.Lock()
			copiedBeforeCut = append(copiedBeforeCut, sp)
			mu.Unlock()
			if compared.Add(1) == int64(q/4) {
				once.Do(func() { cut(); close(cutDone) })
			}
			return nil
		}
	})
	select {
	case <-cutDone:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the tree comparison never got %d files far: %+v", q/4, r.s.Status(context.Background()))
	}
	// Overwritten during the cut, each on the side that did not write it.
	overA, overB := name("b", q-1), name("a", q-1)
	mu.Lock()
	var gone []string // on B by now
	for _, p := range copiedBeforeCut {
		if p != overB && len(gone) < 5 {
			gone = append(gone, p)
		}
	}
	mu.Unlock()

	// While the link is cut: new files on both sides; B deletes five of
	// A's files it already has (the comparison must not bring them back);
	// A deletes five of B's, and each side overwrites one of the other's.
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); writeMany(a, "a", q, 3*q) }()
	go func() { defer wg.Done(); writeMany(b, "b", q, 3*q) }()
	for _, p := range gone {
		do(t, http.MethodDelete, fileURL(b, p))
	}
	for i, deleted := 0, 0; i < q-1 && deleted < 5; i++ { // of those A has already
		p := name("b", i)
		if resp, err := http.Head(fileURL(a, p)); err != nil {
			t.Fatal(err)
		} else if resp.Body.Close(); resp.StatusCode != http.StatusOK {
			continue
		}
		gone = append(gone, p)
		do(t, http.MethodDelete, fileURL(a, p))
		deleted++
	}
	put(t, a, overA, []byte("overwritten on a during the cut"))
	put(t, b, overB, []byte("overwritten on b during the cut"))
	wg.Wait()
	if got := link.Accepted(); got == 0 {
		t.Fatal("the sync never went through the bridge")
	}
	heal()
	writeMany(a, "a", 3*q, n)
	writeMany(b, "b", 3*q, n)
	took := waitConverged(t, r, a, b, 10*time.Minute)
	el := time.Since(t0)
	c := copies(r)
	t.Logf("%d files per side, %d copies: converged %v after the last write, %v after the sync started",
		n, c, took.Round(time.Millisecond), el.Round(time.Millisecond))

	tr := tree(t, a, false)
	for _, p := range gone {
		if _, ok := tr[p]; ok {
			t.Errorf("%s was deleted during the cut and is back", p)
		}
	}
	if got := string(get(t, b, overA)); got != "overwritten on a during the cut" {
		t.Errorf("%s on b = %q", overA, got)
	}
	if got := string(get(t, a, overB)); got != "overwritten on b during the cut" {
		t.Errorf("%s on a = %q", overB, got)
	}
	// Every file crossed once at most: 2n created, 2 overwritten, minus
	// those deleted before they crossed.
	if c > int64(2*n+2) {
		t.Errorf("%d copies for %d files and 2 overwrites: some were copied twice", c, 2*n)
	}
	st := r.s.Status(context.Background())
	for _, d := range st {
		if d.FullSyncs != 1 { // one each: a comparison cut short resumes, it does not begin again
			t.Errorf("%s to %s: %d tree comparisons, want 1", d.From, d.To, d.FullSyncs)
		}
	}
	r.stop()

	r = startSyncAt(t, a.GRPCAddr(), b.GRPCAddr(), 8)
	waitConverged(t, r, a, b, time.Minute)
	if got := copies(r); got != 0 {
		t.Errorf("a restarted sync copied %d files again (before: %+v; now %+v)", got, st, r.s.Status(context.Background()))
	}
}

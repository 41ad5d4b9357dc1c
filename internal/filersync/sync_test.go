package filersync

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
	"github.com/kelpfs/kelp/internal/testcluster"
)

// startSite runs an in-process cluster with a filer (small chunks, so that
// files of a few hundred KiB have several).
func startSite(t testing.TB) *filerserver.Server {
	t.Helper()
	s, _ := startSiteCluster(t)
	return s
}

// startSiteCluster is startSite returning the cluster too.
func startSiteCluster(t testing.TB) (*filerserver.Server, *testcluster.Cluster) {
	t.Helper()
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{MaxVolumes: 20}}})
	s, err := filerserver.New(filerserver.Config{Masters: c.MasterAddrs(), Dir: t.TempDir(), ChunkSize: 64 << 10,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, c
}

func fileURL(s *filerserver.Server, p string) string {
	return "http://" + s.Addr() + (&url.URL{Path: p}).EscapedPath()
}

func put(t testing.TB, s *filerserver.Server, p string, data []byte) {
	t.Helper()
	for try := 0; ; try++ {
		req, _ := http.NewRequest(http.MethodPut, fileURL(s, p), bytes.NewReader(data))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if try > 50 {
			t.Fatalf("put %s: %v", p, err)
		}
		time.Sleep(100 * time.Millisecond) // volume servers still registering
	}
}

func get(t testing.TB, s *filerserver.Server, p string) []byte {
	t.Helper()
	resp, err := http.Get(fileURL(s, p))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("get %s: %d %s", p, resp.StatusCode, b)
	}
	return b
}

func do(t testing.TB, method, u string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d", method, u, resp.StatusCode)
	}
}

// tree is path -> "d" for a directory, else the size and a digest: with
// withContent the SHA-256 of the content as the filer's HTTP API returns it
// (so the data is read, not the metadata), else the stored MD5.
func tree(t testing.TB, s *filerserver.Server, withContent bool) map[string]string {
	t.Helper()
	site, err := OpenSite(context.Background(), "x", s.GRPCAddr(), 10*time.Second, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	out := map[string]string{}
	err = site.Walk(context.Background(), "/", func(e *filerpb.Entry) error {
		if e.IsDir {
			out[e.Path] = "d"
			return nil
		}
		if withContent {
			b := get(t, s, e.Path)
			out[e.Path] = fmt.Sprintf("%d %x", len(b), sha256.Sum256(b))
		} else {
			out[e.Path] = fmt.Sprintf("%d %x", e.Size, e.Md5)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diff(a, b map[string]string) string {
	var d []string
	for k, v := range a {
		if b[k] != v {
			d = append(d, fmt.Sprintf("%s: a=%q b=%q", k, v, b[k]))
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			d = append(d, fmt.Sprintf("%s: a=missing b=%q", k, v))
		}
	}
	if len(d) > 5 {
		d = append(d[:5], fmt.Sprintf("... %d differences", len(d)))
	}
	return strings.Join(d, "\n")
}

type running struct {
	s    *Syncer
	stop func()
}

func startSync(t testing.TB, a, b *filerserver.Server, workers int) *running {
	t.Helper()
	return startSyncAt(t, a.GRPCAddr(), b.GRPCAddr(), workers)
}

// startSyncAt runs a sync between the filers' gRPC addresses (a bridge's, say).
func startSyncAt(t testing.TB, aAddr, bAddr string, workers int) *running {
	t.Helper()
	return startSyncWith(t, Config{A: aAddr, B: bAddr, Workers: workers}, nil)
}

// startSyncWith runs a sync with cfg (no periodic log, no log output);
// setup, when set, sees the Syncer before it runs.
func startSyncWith(t testing.TB, cfg Config, setup func(*Syncer)) *running {
	t.Helper()
	cfg.LogEvery = -1
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
		if os.Getenv("KELP_SYNC_LOG") != "" { // to see what a test's sync does
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
		}
	}
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	r := &running{s: s}
	var once sync.Once
	r.stop = func() { once.Do(func() { cancel(); <-done; s.Close() }) }
	t.Cleanup(r.stop)
	return r
}

// waitConverged waits until the sync has caught up and both trees are
// equal (metadata), then checks the content too.
func waitConverged(t testing.TB, r *running, a, b *filerserver.Server, within time.Duration) time.Duration {
	t.Helper()
	t0 := time.Now()
	var last string
	for time.Since(t0) < within {
		if r.s.CaughtUp(context.Background()) {
			if last = diff(tree(t, a, false), tree(t, b, false)); last == "" {
				el := time.Since(t0)
				if d := diff(tree(t, a, true), tree(t, b, true)); d != "" {
					t.Fatalf("metadata equal, content differs:\n%s", d)
				}
				return el
			}
		}
		time.Sleep(50 * time.Millisecond) // polling a condition
	}
	t.Fatalf("not converged after %v:\n%s\nstatus %+v", within, last, r.s.Status(context.Background()))
	return 0
}

func copies(r *running) int64 {
	var n int64
	for _, st := range r.s.Status(context.Background()) {
		n += st.Copies
	}
	return n
}

func data(name string, n int) []byte {
	return bytes.Repeat([]byte(name+"|"), n/(len(name)+1)+1)[:n]
}

func TestSyncBothWaysRestartDeletesRenames(t *testing.T) {
	a, b := startSite(t), startSite(t)
	for i := range 10 {
		put(t, a, fmt.Sprintf("/s/a%d", i), data(fmt.Sprintf("a%d", i), 1000*i))
		put(t, b, fmt.Sprintf("/s/b%d", i), data(fmt.Sprintf("b%d", i), 1000*i))
	}
	put(t, a, "/big/a.bin", data("big", 300<<10)) // several chunks
	r := startSync(t, a, b, 4)
	for i := 10; i < 20; i++ {
		put(t, a, fmt.Sprintf("/s/a%d", i), data(fmt.Sprintf("a%d", i), 100*i))
		put(t, b, fmt.Sprintf("/s/b%d", i), data(fmt.Sprintf("b%d", i), 100*i))
	}
	waitConverged(t, r, a, b, time.Minute)
	if got := copies(r); got != 41 {
		t.Errorf("first run copied %d files, want 41", got)
	}
	st := r.s.Status(context.Background())
	r.stop()

	// While the sync is stopped: new files, an overwrite, a delete and a
	// rename on each side.
	for i := 20; i < 25; i++ {
		put(t, a, fmt.Sprintf("/s/a%d", i), data(fmt.Sprintf("a%d", i), 500))
		put(t, b, fmt.Sprintf("/s/b%d", i), data(fmt.Sprintf("b%d", i), 500))
	}
	put(t, a, "/s/b3", []byte("b3 changed on a"))
	do(t, http.MethodDelete, fileURL(a, "/s/b4"))
	do(t, http.MethodPost, fileURL(b, "/t/a5-moved")+"?op=rename&from=/s/a5")
	do(t, http.MethodPost, fileURL(a, "/moved")+"?op=rename&from=/big")
	do(t, http.MethodDelete, fileURL(b, "/s/a6"))

	r = startSync(t, a, b, 4)
	waitConverged(t, r, a, b, time.Minute)
	tr := tree(t, a, false)
	for _, p := range []string{"/s/b4", "/s/a5", "/s/a6", "/big/a.bin"} {
		if _, ok := tr[p]; ok {
			t.Errorf("%s still exists", p)
		}
	}
	for _, p := range []string{"/t/a5-moved", "/moved/a.bin", "/s/a24", "/s/b24"} {
		if _, ok := tr[p]; !ok {
			t.Errorf("%s missing", p)
		}
	}
	if got := string(get(t, b, "/s/b3")); got != "b3 changed on a" {
		t.Errorf("b3 on b = %q", got)
	}
	// 10 new files and the overwrite; the renames move data without a copy.
	if got := copies(r); got != 11 {
		t.Errorf("second run copied %d files, want 11 (status before %+v, now %+v)", got, st, r.s.Status(context.Background()))
	}
	r.stop()

	// A restart with nothing new copies nothing.
	r = startSync(t, a, b, 4)
	waitConverged(t, r, a, b, time.Minute)
	if got := copies(r); got != 0 {
		t.Errorf("restart with nothing new copied %d files", got)
	}
	// And no ping-pong: after convergence a new write is copied once.
	put(t, b, "/s/late", []byte("late"))
	waitConverged(t, r, a, b, time.Minute)
	if got := copies(r); got != 1 {
		t.Errorf("one new file made %d copies", got)
	}
}

func TestSyncConflictNewerWins(t *testing.T) {
	a, b := startSite(t), startSite(t)
	put(t, a, "/c/x", []byte("original"))
	r := startSync(t, a, b, 2)
	waitConverged(t, r, a, b, time.Minute)
	r.stop()
	// Both sides change the same file while the sync is stopped; b's
	// change is the later one and must win on both.
	put(t, a, "/c/x", []byte("from a"))
	put(t, b, "/c/x", []byte("from b, later"))
	put(t, b, "/c/y", []byte("b first"))
	put(t, a, "/c/y", []byte("a later"))
	r = startSync(t, a, b, 2)
	waitConverged(t, r, a, b, time.Minute)
	if got := string(get(t, a, "/c/x")); got != "from b, later" {
		t.Errorf("/c/x = %q", got)
	}
	if got := string(get(t, b, "/c/y")); got != "a later" {
		t.Errorf("/c/y = %q", got)
	}
	if Wins(5, "a", 5, "b") || !Wins(5, "b", 5, "a") || !Wins(6, "a", 5, "b") {
		t.Error("tie rule")
	}
}

// TestSyncMany writes files on both sides, half before the sync starts and
// half while it runs, and reports the rate. KELP_SYNC_FILES sets the count
// per side (default 500, so 1,000 in all; 5000 for the 10,000-file run).
func TestSyncMany(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	n := 500
	if v := os.Getenv("KELP_SYNC_FILES"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	a, b := startSite(t), startSite(t)
	writeMany := func(s *filerserver.Server, side string, from, to int) {
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := from + w; i < to; i += 8 {
					put(t, s, fmt.Sprintf("/m/%s/d%d/f%d", side, i%20, i), data(side+strconv.Itoa(i), 100+i%2000))
				}
			}()
		}
		wg.Wait()
	}
	writeMany(a, "a", 0, n/2)
	writeMany(b, "b", 0, n/2)
	t0 := time.Now()
	r := startSync(t, a, b, 8)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); writeMany(a, "a", n/2, n) }()
	go func() { defer wg.Done(); writeMany(b, "b", n/2, n) }()
	wg.Wait()
	waitConverged(t, r, a, b, 10*time.Minute)
	el := time.Since(t0)
	c := copies(r)
	if c != int64(2*n) {
		t.Errorf("copied %d files, want %d", c, 2*n)
	}
	t.Logf("%d files synced in %v: %.0f files/s", c, el.Round(time.Millisecond), float64(c)/el.Seconds())
	r.stop()
	r = startSync(t, a, b, 8)
	waitConverged(t, r, a, b, time.Minute)
	if got := copies(r); got != 0 {
		t.Errorf("restart copied %d files again", got)
	}
}

// TestSyncTrimmedLog: while the sync is stopped, B's events (including
// those after the stored position) are deleted by retention; the restarted
// sync compares the trees instead of missing the changes.
func TestSyncTrimmedLog(t *testing.T) {
	a, b := startSite(t), startSite(t)
	put(t, a, "/t/one", []byte("one"))
	r := startSync(t, a, b, 2)
	waitConverged(t, r, a, b, time.Minute)
	r.stop()
	put(t, b, "/t/two", []byte("two, written on b while the sync was stopped"))
	put(t, b, "/t/one", []byte("one, changed on b"))
	if _, err := b.Filer().TrimEvents(context.Background(), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	put(t, b, "/t/three", []byte("three, after the trim"))
	r = startSync(t, a, b, 2)
	waitConverged(t, r, a, b, time.Minute)
	var full int64
	for _, st := range r.s.Status(context.Background()) {
		full += st.FullSyncs
	}
	if full != 1 {
		t.Errorf("%d tree comparisons, want 1 (b to a)", full)
	}
	if got := string(get(t, a, "/t/one")); got != "one, changed on b" {
		t.Errorf("/t/one on a = %q", got)
	}
}

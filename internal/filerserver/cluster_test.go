package filerserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/filer/store"
	"github.com/kelpfs/kelp/internal/filer/store/postgres"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
	"github.com/kelpfs/kelp/internal/testcluster"
	"github.com/kelpfs/kelp/internal/testutil"
)

// startOn runs a filer against cluster c; cfg's Masters and Logger are filled in.
func startOn(t testing.TB, c *testcluster.Cluster, cfg Config) *Server {
	t.Helper()
	cfg.Masters = c.MasterAddrs()
	if cfg.Dir == "" && cfg.MetaStore == nil {
		cfg.Dir = t.TempDir()
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

func TestClusterFilesAndGarbageCollection(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}, {}}})
	const cs = 64 << 10
	s := startOn(t, c, Config{ChunkSize: cs, GCDelay: -1})
	base := "http://" + s.Addr()
	sizes := []int{0, 1, cs - 1, cs, cs + 1, 5*cs + 77}
	datas := map[int][]byte{}
	for _, n := range sizes {
		data := make([]byte, n)
		rand.Read(data)
		datas[n] = data
		resp, body := do(t, "PUT", fmt.Sprintf("%s/c/f%d", base, n), bytes.NewReader(data))
		want(t, resp, body, 201)
	}
	for _, n := range sizes {
		resp, body := do(t, "GET", fmt.Sprintf("%s/c/f%d", base, n), nil)
		want(t, resp, body, 200)
		if !bytes.Equal(body, datas[n]) {
			t.Fatalf("f%d: content differs", n)
		}
	}
	ctx := context.Background()
	e, err := s.Filer().FindEntry(ctx, fmt.Sprintf("/c/f%d", 5*cs+77))
	if err != nil || len(e.Chunks) != 6 {
		t.Fatalf("entry %v %v", e, err)
	}
	resp, body := do(t, "DELETE", base+"/c?recursive=true", nil)
	want(t, resp, body, 204)
	// The background collector deletes the chunks from the volume servers.
	cl, err := client.New(client.Config{Masters: c.MasterAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, ch := range e.Chunks {
		id, _ := fid.Parse(ch.FID)
		for {
			rc, _, err := cl.Get(ctx, id, nil)
			if errors.Is(err, client.ErrNotFound) {
				break
			}
			if err == nil {
				rc.Close()
			}
			if time.Now().After(deadline) {
				t.Fatalf("chunk %s still readable after delete: %v", ch.FID, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func TestClusterGRPC(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}})
	s := startOn(t, c, Config{})
	conn, err := grpc.NewClient(s.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	g := filerpb.NewFilerClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sub, err := g.SubscribeMetadata(ctx, &filerpb.SubscribeMetadataRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// A gateway uploads a chunk itself, then references it.
	a, err := g.AssignVolume(ctx, &filerpb.AssignVolumeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cl, _ := client.New(client.Config{Masters: c.MasterAddrs()})
	id, _ := fid.Parse(a.Fid)
	if _, err := cl.Upload(ctx, a.Url, id, strings.NewReader("from a gateway"), 14, client.UploadOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = g.CreateEntry(ctx, &filerpb.CreateEntryRequest{Entry: &filerpb.Entry{
		Path: "/gw/obj", Mode: 0o644, Mime: "text/plain",
		Chunks: []*filerpb.Chunk{{Fid: a.Fid, Size: 14}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	resp, body := do(t, "GET", "http://"+s.Addr()+"/gw/obj", nil)
	want(t, resp, body, 200)
	if string(body) != "from a gateway" {
		t.Fatalf("got %q", body)
	}
	l, err := g.LookupEntry(ctx, &filerpb.LookupEntryRequest{Path: "/gw/obj"})
	if err != nil || l.Entry.Size != 14 || l.Entry.Mime != "text/plain" {
		t.Fatalf("lookup %v %v", l, err)
	}
	if _, err := g.Rename(ctx, &filerpb.RenameRequest{From: "/gw", To: "/gw/inside"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("rename into itself: %v", err)
	}
	if _, err := g.Rename(ctx, &filerpb.RenameRequest{From: "/gw", To: "/gw2"}); err != nil {
		t.Fatal(err)
	}
	ls, err := g.ListEntries(ctx, &filerpb.ListEntriesRequest{Dir: "/gw2"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for {
		m, err := ls.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, m.Entry.Path)
	}
	if fmt.Sprint(names) != "[/gw2/obj]" {
		t.Fatalf("list %v", names)
	}
	if _, err := g.DeleteEntry(ctx, &filerpb.DeleteEntryRequest{Path: "/gw2"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("delete non-empty: %v", err)
	}
	if _, err := g.LookupEntry(ctx, &filerpb.LookupEntryRequest{Path: "/a/../b"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad path: %v", err)
	}
	var got []string
	for len(got) < 3 {
		ev, err := sub.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d:%s", ev.Seq, ev.Type))
	}
	if fmt.Sprint(got) != "[1:CREATE 2:CREATE 3:RENAME]" {
		t.Fatalf("events %v", got)
	}
}

// TestClusterTwoFilersOnPostgres: a file written through one filer is read
// through another sharing one PostgreSQL table.
func TestClusterTwoFilersOnPostgres(t *testing.T) {
	dsn := os.Getenv("KELP_TEST_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:54329/kelptest?sslmode=disable"
	}
	pool, err := pgxpool.New(context.Background(), dsn)
	if err == nil {
		err = pool.Ping(context.Background())
	}
	if err != nil {
		testutil.SkipOrFail(t, "PostgreSQL at %s unreachable: %v", dsn, err)
	}
	var rb [6]byte
	rand.Read(rb[:])
	table := "kelp_filerserver_test_" + hex.EncodeToString(rb[:])
	t.Cleanup(func() { pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table); pool.Close() })
	open := func() store.Store {
		st, err := postgres.Open(context.Background(), dsn, &postgres.Options{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}})
	a := startOn(t, c, Config{MetaStore: open(), ChunkSize: 1 << 16})
	b := startOn(t, c, Config{MetaStore: open(), ChunkSize: 1 << 16})
	data := make([]byte, 200_000)
	rand.Read(data)
	resp, body := do(t, "PUT", "http://"+a.Addr()+"/shared/file.bin", bytes.NewReader(data))
	want(t, resp, body, 201)
	resp, body = do(t, "GET", "http://"+b.Addr()+"/shared/file.bin", nil)
	want(t, resp, body, 200)
	if !bytes.Equal(body, data) {
		t.Fatal("filer b reads different bytes")
	}
	resp, body = do(t, "POST", "http://"+b.Addr()+"/moved.bin?op=rename&from=/shared/file.bin", nil)
	want(t, resp, body, 200)
	resp, body = do(t, "GET", "http://"+a.Addr()+"/moved.bin", nil)
	want(t, resp, body, 200)
	if !bytes.Equal(body, data) {
		t.Fatal("filer a does not see b's rename")
	}
}

// readRSS returns the process's resident set and its high-water mark, in bytes.
func readRSS() (rss, hwm int64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1, -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && (f[0] == "VmRSS:" || f[0] == "VmHWM:") {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			if f[0] == "VmRSS:" {
				rss = n << 10
			} else {
				hwm = n << 10
			}
		}
	}
	return rss, hwm
}

// patternReader yields size bytes of a repeating pattern without holding them.
type patternReader struct{ off, size int64 }

func (p *patternReader) Read(b []byte) (int, error) {
	if p.off >= p.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(b)), p.size-p.off))
	for i := 0; i < n; i++ {
		b[i] = byte((p.off + int64(i)) % 251)
	}
	p.off += int64(n)
	return n, nil
}

// TestClusterLargeFileStreamed streams a file through the filer's HTTP API
// and back (64 MiB; 1 GiB with KELP_TEST_HUGE=1 and -short=false) and
// checks that the Go heap stays bounded by a few chunks. The process's RSS
// high-water mark is logged; it includes the in-process volume servers.
func TestClusterLargeFileStreamed(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 64 MiB through a cluster")
	}
	size := int64(64 << 20)
	if os.Getenv("KELP_TEST_HUGE") == "1" {
		size = 1 << 30
	}
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}})
	s := startOn(t, c, Config{})
	url := "http://" + s.Addr() + "/big/file"
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // reset VmHWM where allowed
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap0 := ms.HeapAlloc
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				if m.HeapAlloc > peak.Load() {
					peak.Store(m.HeapAlloc)
				}
			}
		}
	}()
	start := time.Now()
	req, _ := http.NewRequest("PUT", url, &patternReader{size: size})
	req.ContentLength = -1 // chunked: the filer cannot size buffers from a length
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("PUT: %d", resp.StatusCode)
	}
	up := time.Since(start)
	start = time.Now()
	resp, err = http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(&patternChecker{}, resp.Body)
	resp.Body.Close()
	if err != nil || n != size {
		t.Fatalf("GET: %d bytes, %v", n, err)
	}
	down := time.Since(start)
	close(stop)
	wg.Wait()
	growth := int64(peak.Load()) - int64(heap0)
	_, hwm := readRSS()
	t.Logf("%d MiB: upload %.0f MiB/s, download %.0f MiB/s, peak heap growth %.0f MiB, process RSS high-water %.0f MiB",
		size>>20, float64(size>>20)/up.Seconds(), float64(size>>20)/down.Seconds(), float64(growth)/(1<<20), float64(hwm)/(1<<20))
	// Split holds Concurrency+1 8 MiB buffers; the HTTP and volume layers
	// add their own. Far below the file size is the point.
	if limit := int64(128 << 20); growth > limit {
		t.Fatalf("heap grew by %d MiB while streaming", growth>>20)
	}
}

type patternChecker struct{ off int64 }

func (p *patternChecker) Write(b []byte) (int, error) {
	for i, c := range b {
		if c != byte((p.off+int64(i))%251) {
			return i, fmt.Errorf("byte %d differs", p.off+int64(i))
		}
	}
	p.off += int64(len(b))
	return len(b), nil
}

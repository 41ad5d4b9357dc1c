package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/client/clienttest"
	"github.com/kelpfs/kelp/internal/fid"
)

func newClient(t *testing.T, cfg client.Config) *client.Client {
	t.Helper()
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// deadAddr is a loopback address nobody listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func readAll(t *testing.T, rc io.ReadCloser) []byte {
	t.Helper()
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNewRejectsEmptyMasters(t *testing.T) {
	for _, m := range [][]string{nil, {""}, {" , "}} {
		if _, err := client.New(client.Config{Masters: m}); !errors.Is(err, client.ErrConfig) {
			t.Errorf("New(%q) = %v, want ErrConfig", m, err)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Servers: 2})
	c := newClient(t, client.Config{Masters: []string{cl.Master.URL}})
	ctx := context.Background()

	data := []byte("hello, kelp")
	id, res, err := c.PutBytes(ctx, client.AssignRequest{}, data, client.UploadOptions{MimeType: "text/plain"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Size != int64(len(data)) || res.ETag == "" {
		t.Fatalf("upload result %+v", res)
	}
	if got, ok := cl.Needle(id); !ok || !bytes.Equal(got, data) {
		t.Fatalf("stored %q, %v", got, ok)
	}

	rc, info, err := c.Get(ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, rc); !bytes.Equal(got, data) {
		t.Fatalf("Get = %q", got)
	}
	if info.Size != int64(len(data)) || info.ContentType != "text/plain" || info.ETag != res.ETag || info.Partial {
		t.Fatalf("info %+v, upload etag %q", info, res.ETag)
	}
	if info.LastModified.IsZero() {
		t.Error("no LastModified")
	}

	rc, info, err = c.Get(ctx, id, &client.Range{Offset: 7, Length: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, rc); string(got) != "ke" || !info.Partial || info.Size != 2 || info.TotalSize != int64(len(data)) {
		t.Fatalf("range read %q, %+v", got, info)
	}
	rc, _, err = c.Get(ctx, id, &client.Range{Offset: 7})
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, rc); string(got) != "kelp" {
		t.Fatalf("open range read %q", got)
	}

	if err := c.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Get(ctx, id, nil); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Get after delete = %v, want ErrNotFound", err)
	}
	if err := c.Delete(ctx, id); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("second Delete = %v, want ErrNotFound", err)
	}
}

func TestUploadEmptyAndNamed(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	c := newClient(t, client.Config{Masters: []string{cl.Master.URL}})
	ctx := context.Background()

	id, _, err := c.PutBytes(ctx, client.AssignRequest{}, nil, client.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := cl.Needle(id); !ok || len(got) != 0 {
		t.Fatalf("empty needle stored as %q, %v", got, ok)
	}

	data := bytes.Repeat([]byte("x"), 3000)
	id, res, err := c.PutBytes(ctx, client.AssignRequest{}, data,
		client.UploadOptions{Name: `photo "1".jpg`, MimeType: "image/jpeg"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Name != `photo "1".jpg` || res.Size != 3000 {
		t.Fatalf("named upload result %+v", res)
	}
	rc, info, err := c.Get(ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, rc); !bytes.Equal(got, data) {
		t.Fatalf("named needle read back %d bytes", len(got))
	}
	if info.Name != `photo "1".jpg` || info.ContentType != "image/jpeg" {
		t.Fatalf("named needle info %+v", info)
	}
}

func TestAssignPassesParameters(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	c := newClient(t, client.Config{Masters: []string{cl.Master.URL}})
	a, err := c.Assign(context.Background(), client.AssignRequest{
		Count: 5, Collection: "pics", Replication: "001", TTL: "3d", DataCenter: "dc 1"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Count != 5 || a.URL == "" || a.FID.Volume == 0 {
		t.Fatalf("assignment %+v", a)
	}
	if q := cl.Master.LastAssignQuery(); q != "count=5&collection=pics&replication=001&ttl=3d&dataCenter=dc+1" {
		t.Fatalf("query %q", q)
	}
}

func TestAssignErrors(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	// One round, no waiting for the 503 to pass.
	c := newClient(t, client.Config{Masters: []string{cl.Master.URL}, MasterWait: -1})
	cl.Master.SetWritable()
	_, err := c.Assign(context.Background(), client.AssignRequest{})
	var he *client.HTTPError
	if !errors.As(err, &he) || he.Status != http.StatusServiceUnavailable || he.Message != "no writable volume" {
		t.Fatalf("Assign with no writable volume = %v", err)
	}
	if errors.Is(err, client.ErrNotFound) {
		t.Fatal("503 matched ErrNotFound")
	}
}

func TestLookupUnknownVolume(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	c := newClient(t, client.Config{Masters: []string{cl.Master.URL}})
	_, err := c.Lookup(context.Background(), 999)
	var he *client.HTTPError
	if !errors.Is(err, client.ErrNotFound) || !errors.As(err, &he) || !strings.Contains(he.Message, "999") {
		t.Fatalf("Lookup(999) = %v", err)
	}
	_, _, err = c.Get(context.Background(), fid.FileID{Volume: 999, Key: 1, Cookie: 2}, nil)
	if !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Get on unknown volume = %v", err)
	}
}

func TestMalformedFidIsNotRetried(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Servers: 2, Replicas: 2})
	c := newClient(t, client.Config{Masters: []string{cl.Master.URL}})
	for _, s := range cl.Servers {
		s.SetHook(func(w http.ResponseWriter, r *http.Request) bool {
			clienttest.WriteError(w, http.StatusBadRequest, "bad fid")
			return true
		})
	}
	_, _, err := c.Get(context.Background(), fid.FileID{Volume: 1, Key: 1, Cookie: 2}, nil)
	var he *client.HTTPError
	if !errors.As(err, &he) || he.Status != http.StatusBadRequest {
		t.Fatalf("Get = %v, want a 400", err)
	}
	if n := cl.Servers[0].Reads.Load() + cl.Servers[1].Reads.Load(); n != 0 {
		t.Fatalf("hooks bypassed: %d reads", n)
	}
	if cl.Master.Lookups.Load() != 1 {
		t.Fatalf("a 400 caused %d lookups, want 1", cl.Master.Lookups.Load())
	}
}

// masterStub is a hand-written master for fail-over tests.
func masterStub(t *testing.T, h http.HandlerFunc) (*httptest.Server, string) {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s, strings.TrimPrefix(s.URL, "http://")
}

func TestMasterListFailover(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	dead := deadAddr(t)
	// Both spellings of a list: several entries and a comma-separated one.
	for _, masters := range [][]string{{dead, cl.Master.URL}, {dead + "," + cl.Master.URL}} {
		c := newClient(t, client.Config{Masters: masters})
		if _, err := c.Assign(context.Background(), client.AssignRequest{}); err != nil {
			t.Fatalf("masters %q: %v", masters, err)
		}
	}

	c := newClient(t, client.Config{Masters: []string{dead, deadAddr(t)}, MasterWait: -1})
	_, err := c.Assign(context.Background(), client.AssignRequest{})
	if !errors.Is(err, client.ErrNoMaster) {
		t.Fatalf("Assign with only dead masters = %v, want ErrNoMaster", err)
	}
}

func TestMasterFollowsLeaderHintAndRemembersIt(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	var followerHits int
	_, follower := masterStub(t, func(w http.ResponseWriter, r *http.Request) {
		followerHits++
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":"not the leader","leader":"`+cl.Master.URL+`"}`)
	})
	c := newClient(t, client.Config{Masters: []string{follower}})
	for i := 0; i < 3; i++ {
		if _, err := c.Assign(context.Background(), client.AssignRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if followerHits != 1 || cl.Master.Assigns.Load() != 3 {
		t.Fatalf("follower asked %d times, leader %d; want 1 and 3", followerHits, cl.Master.Assigns.Load())
	}
}

func TestMasterLeaderHintLoopIsBounded(t *testing.T) {
	var a, b string
	var hits int
	_, a = masterStub(t, func(w http.ResponseWriter, r *http.Request) {
		hits++
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":"not the leader","leader":"`+b+`"}`)
	})
	_, b = masterStub(t, func(w http.ResponseWriter, r *http.Request) {
		hits++
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":"not the leader","leader":"`+a+`"}`)
	})
	c := newClient(t, client.Config{Masters: []string{a}, MasterWait: -1})
	_, err := c.Assign(context.Background(), client.AssignRequest{})
	var he *client.HTTPError
	if !errors.As(err, &he) || he.Status != http.StatusServiceUnavailable || he.Message != "not the leader" {
		t.Fatalf("Assign between two followers = %v", err)
	}
	if hits > 5 {
		t.Fatalf("%d requests in one round: leader hints not bounded", hits)
	}
}

func TestMasterRedirectIsFollowed(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	_, follower := masterStub(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+cl.Master.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	})
	c := newClient(t, client.Config{Masters: []string{follower}})
	if _, err := c.Lookup(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if cl.Master.Lookups.Load() != 1 {
		t.Fatalf("leader saw %d lookups", cl.Master.Lookups.Load())
	}
}

func TestLookupCacheTTL(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	now := time.Unix(1000, 0)
	c := newClient(t, client.Config{Masters: []string{cl.Master.URL}, LookupTTL: time.Minute,
		Now: func() time.Time { return now }})
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		locs, err := c.Lookup(ctx, 1)
		if err != nil || len(locs) != 1 || locs[0].URL != cl.Servers[0].URL {
			t.Fatalf("Lookup = %+v, %v", locs, err)
		}
		locs[0].URL = "scribbled" // the caller's copy; must not reach the cache
	}
	if n := cl.Master.Lookups.Load(); n != 1 {
		t.Fatalf("%d master lookups, want 1 (cached)", n)
	}
	now = now.Add(61 * time.Second)
	if _, err := c.Lookup(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if n := cl.Master.Lookups.Load(); n != 2 {
		t.Fatalf("%d master lookups after expiry, want 2", n)
	}
	c.Invalidate(1)
	if _, err := c.Lookup(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if n := cl.Master.Lookups.Load(); n != 3 {
		t.Fatalf("%d master lookups after Invalidate, want 3", n)
	}
}

// A volume moved: the cached location is dead, the master knows the new one.
// Get must drop the cache entry, look up again and read from the new place.
func TestGetInvalidatesStaleLocation(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	c := newClient(t, client.Config{Masters: []string{cl.Master.URL}})
	ctx := context.Background()
	id, _, err := c.PutBytes(ctx, client.AssignRequest{}, []byte("moved"), client.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dead := deadAddr(t)
	moved := false
	cl.Master.SetHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/dir/lookup" || moved {
			return false
		}
		cl.Master.Lookups.Add(1)
		io.WriteString(w, `{"volumeId":"1","locations":[{"url":"`+dead+`","publicUrl":"`+dead+`"}]}`)
		return true
	})
	if _, err := c.Lookup(ctx, id.Volume); err != nil { // caches the dead location
		t.Fatal(err)
	}
	moved = true
	rc, _, err := c.Get(ctx, id, nil)
	if err != nil {
		t.Fatalf("Get after move: %v", err)
	}
	if got := readAll(t, rc); string(got) != "moved" {
		t.Fatalf("read %q", got)
	}
	if n := cl.Master.Lookups.Load(); n != 2 {
		t.Fatalf("%d lookups, want 2", n)
	}
	// The fresh location is cached now.
	if _, _, err := c.Get(ctx, id, nil); err != nil {
		t.Fatal(err)
	}
	if n := cl.Master.Lookups.Load(); n != 2 {
		t.Fatalf("%d lookups after a good read, want still 2", n)
	}
}

// closeCounter is an upload body that records its Close.
type closeCounter struct {
	io.Reader
	closed chan struct{}
}

func (c *closeCounter) Close() error { close(c.closed); return nil }

func TestUploadClosesBody(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	c := newClient(t, client.Config{Masters: []string{cl.Master.URL}})
	ctx := context.Background()
	for _, tc := range []struct {
		data string
		opts client.UploadOptions
	}{{"abc", client.UploadOptions{}}, {"", client.UploadOptions{}}, {"abc", client.UploadOptions{Name: "n"}}, {"", client.UploadOptions{Name: "n"}}} {
		a, err := c.Assign(ctx, client.AssignRequest{})
		if err != nil {
			t.Fatal(err)
		}
		body := &closeCounter{Reader: strings.NewReader(tc.data), closed: make(chan struct{})}
		res, err := c.Upload(ctx, a.URL, a.FID, body, int64(len(tc.data)), tc.opts)
		if err != nil || res.Size != int64(len(tc.data)) {
			t.Fatalf("%+v: Upload = %+v, %v", tc, res, err)
		}
		select {
		case <-body.closed:
		case <-time.After(5 * time.Second):
			t.Fatalf("%+v: body never closed", tc)
		}
		if got, ok := cl.Needle(a.FID); !ok || string(got) != tc.data {
			t.Fatalf("%+v: stored %q, %v", tc, got, ok)
		}
	}
}

// A volume server that accepts the connection but never answers (frozen, or
// behind a cut network) must not hang the client: reads fail over to the
// next copy and writes go to a new assignment once AnswerTimeout passes.
func TestSilentVolumeServerDoesNotHang(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Servers: 2, Replicas: 2})
	c := newClient(t, client.Config{Masters: []string{cl.Master.URL}, AnswerTimeout: 200 * time.Millisecond})
	id, _, err := c.PutBytes(context.Background(), client.AssignRequest{}, []byte("kept"), client.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer close(release)
	silent := func(w http.ResponseWriter, r *http.Request) bool { <-release; return true }
	cl.Servers[0].SetHook(silent)

	start := time.Now()
	rc, _, err := c.Get(context.Background(), id, nil)
	if err != nil {
		t.Fatalf("Get with one silent copy: %v", err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if string(got) != "kept" {
		t.Fatalf("read %q", got)
	}
	cl.Servers[1].SetHook(silent)
	_, _, err = c.PutBytes(context.Background(), client.AssignRequest{}, []byte("x"), client.UploadOptions{})
	if !errors.Is(err, client.ErrNoAnswer) {
		t.Fatalf("Put with every server silent = %v, want ErrNoAnswer", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v", d)
	}
}

// With AssignBatch, Puts share one assign per block of keys, yet every file
// gets its own key and a fresh cookie, and a failed upload drops the block.
func TestAssignBatchReusesKeysWithFreshCookies(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Servers: 1})
	c := newClient(t, client.Config{Masters: []string{cl.Master.URL}, AssignBatch: 8})
	seen := map[fid.FileID]bool{}
	cookies := map[uint32]bool{}
	for i := 0; i < 20; i++ {
		id, _, err := c.PutBytes(context.Background(), client.AssignRequest{}, []byte(fmt.Sprint(i)), client.UploadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Fatalf("file id %s handed out twice", id)
		}
		seen[id] = true
		cookies[id.Cookie] = true
		rc, _, err := c.Get(context.Background(), id, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if string(got) != fmt.Sprint(i) {
			t.Fatalf("file %d reads %q", i, got)
		}
	}
	if n := cl.Master.Assigns.Load(); n != 3 {
		t.Fatalf("20 puts with blocks of 8 made %d assigns, want 3", n)
	}
	if len(cookies) < 19 {
		t.Fatalf("only %d distinct cookies for 20 files", len(cookies))
	}
}

// TestUploadAsksForAnUnhurriedSync: UnhurriedSync is the query the volume
// server reads (docs/volume-server.md); without it the upload has no query.
func TestUploadAsksForAnUnhurriedSync(t *testing.T) {
	queries := make(chan string, 2)
	_, addr := masterStub(t, func(w http.ResponseWriter, r *http.Request) {
		queries <- r.URL.RawQuery
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"size":1,"eTag":"x"}`))
	})
	c := newClient(t, client.Config{Masters: []string{addr}})
	id := fid.FileID{Volume: 3, Key: 1, Cookie: 2}
	for _, unhurried := range []bool{true, false} {
		if _, err := c.Upload(context.Background(), addr, id, bytes.NewReader([]byte("x")), 1,
			client.UploadOptions{UnhurriedSync: unhurried}); err != nil {
			t.Fatal(err)
		}
		want := ""
		if unhurried {
			want = "sync=unhurried"
		}
		if got := <-queries; got != want {
			t.Fatalf("UnhurriedSync %v: query %q, want %q", unhurried, got, want)
		}
	}
}

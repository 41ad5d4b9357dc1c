package linz

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/fsview"
	kelps3 "github.com/kelpfs/kelp/internal/s3"
	"github.com/kelpfs/kelp/internal/testcluster"
	"github.com/kelpfs/kelp/internal/testutil/bridge"
	"github.com/kelpfs/kelp/internal/testutil/netcut"
	"github.com/kelpfs/kelp/internal/webdav"
)

// opTimeout bounds every client operation: one that runs into a paused or
// blackholed bridge ends with an error (a write's outcome is then unknown).
const opTimeout = 2 * time.Second

// rig is a cluster of three masters and two volume servers, a filer and an
// S3 gateway, with a bridge in front of the filer's HTTP port, one in front
// of the gateway, and one on the filer's way to each volume server.
type rig struct {
	c       *testcluster.Cluster
	filer   *bridge.Bridge
	gateway *bridge.Bridge
	volumes []*bridge.Bridge
	// filerGRPC is a bridge in front of the filer's gRPC port, for
	// gateways that use it (WebDAV); blobs is the HTTP client that reaches
	// the volume servers through their bridges.
	filerGRPC *bridge.Bridge
	blobs     *http.Client
	webdav    *bridge.Bridge // set by startWebDAV
	extra     []*bridge.Bridge
	fcfg      filerserver.Config // the filer's configuration
}

func newBridge(t *testing.T, target string) *bridge.Bridge {
	t.Helper()
	b, err := bridge.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func startRig(t *testing.T) *rig { return startRigWith(t, nil) }

// startRigWith is startRig with the filer's configuration changed by mod.
func startRigWith(t *testing.T, mod func(*filerserver.Config)) *rig {
	t.Helper()
	c := testcluster.Start(t, testcluster.Options{Masters: 3, Volumes: []testcluster.VolumeSpec{{}, {}},
		PulseInterval: 200 * time.Millisecond, RaftNetwork: netcut.New()})
	r := &rig{c: c}
	// The filer reaches volume servers through bridges: its HTTP client
	// dials a volume server's bridge instead of the server.
	via := map[string]string{}
	for _, v := range c.Volume {
		b := newBridge(t, v.Addr)
		r.volumes = append(r.volumes, b)
		via[v.Addr] = b.Addr()
	}
	tr := client.NewHTTPClient().Transport.(*http.Transport).Clone()
	var d net.Dialer
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if b, ok := via[addr]; ok {
			addr = b
		}
		return d.DialContext(ctx, network, addr)
	}
	r.blobs = &http.Client{Transport: tr}
	fcfg := filerserver.Config{Masters: c.MasterAddrs(), Dir: t.TempDir(), ChunkSize: 64 << 10,
		HTTPClient: r.blobs, Logger: slog.New(slog.DiscardHandler)}
	if mod != nil {
		mod(&fcfg)
	}
	r.fcfg = fcfg
	fs, err := filerserver.New(fcfg)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := kelps3.New(kelps3.Config{
		Namespace:  fs.Filer(),
		Identities: []kelps3.Identity{{Name: "admin", Credentials: []kelps3.Credential{{AccessKey: testAK, SecretKey: testSK}}, Actions: []string{"Admin"}}},
		Logger:     slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	fdone, gdone := make(chan error, 1), make(chan error, 1)
	go func() { fdone <- fs.Run(ctx) }()
	go func() { gdone <- gw.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-gdone; <-fdone })
	r.filer = newBridge(t, fs.Addr())
	r.gateway = newBridge(t, gw.URL()[len("http://"):])
	r.filerGRPC = newBridge(t, fs.GRPCAddr())
	return r
}

const (
	testAK = "AKIDLINZADMIN"
	testSK = "secret-linz-0123456789"
)

// startWebDAV serves WebDAV over a view that reaches the filer's gRPC
// port and the volume servers through their bridges, with a bridge in
// front of it.
func (r *rig) startWebDAV(t *testing.T) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	v, err := fsview.New(context.Background(), fsview.Config{Filer: r.filerGRPC.Addr(), HTTPClient: r.blobs, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	srv := httptest.NewServer(webdav.Handler(v, log))
	t.Cleanup(srv.Close)
	r.webdav = newBridge(t, srv.Listener.Addr().String())
}

// emptyFile is what a read of an existing empty file returns; no client
// writes one, so the model never accepts it.
const emptyFile = "<empty file>"

// filerKV is the filer HTTP API: PUT, GET and DELETE of small files.
type filerKV struct {
	base string
	hc   *http.Client
	dir  string // under the base; "/linz/" when empty
	// emptyIsGap leaves reads of an empty file out (errRefused): WebDAV
	// shows one while a PUT runs (TestWebDAVPutIsAtomic).
	emptyIsGap bool
}

func (f *filerKV) do(method, key string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, f.base+f.prefix()+key, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	resp, err := f.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func (f *filerKV) prefix() string {
	if f.dir == "" {
		return "/linz/"
	}
	return f.dir
}

func (f *filerKV) Get(key string) (string, error) {
	code, b, err := f.do("GET", key, nil)
	switch {
	case err != nil:
		return "", err
	case code == http.StatusNotFound:
		return "", nil
	case code != http.StatusOK:
		return "", fmt.Errorf("GET %s: %d %s", key, code, b)
	case len(b) == 0 && f.emptyIsGap:
		return "", fmt.Errorf("GET %s: %w: an empty file, a PUT in progress", key, errRefused)
	case len(b) == 0:
		return emptyFile, nil // never written: a state between two writes
	}
	return string(b), nil
}

func (f *filerKV) Put(key, value string) error {
	code, b, err := f.do("PUT", key, []byte(value))
	if err == nil && code == http.StatusLocked {
		err = fmt.Errorf("PUT %s: %w: %d %s", key, errRefused, code, b)
	}
	if err == nil && code != http.StatusCreated && code != http.StatusOK && code != http.StatusNoContent {
		err = fmt.Errorf("PUT %s: %d %s", key, code, b)
	}
	return err
}

func (f *filerKV) Delete(key string) error {
	code, b, err := f.do("DELETE", key, nil)
	if err == nil && code == http.StatusLocked {
		err = fmt.Errorf("DELETE %s: %w: %d %s", key, errRefused, code, b)
	}
	if err == nil && code != http.StatusNoContent && code != http.StatusNotFound {
		err = fmt.Errorf("DELETE %s: %d %s", key, code, b)
	}
	return err
}

// s3KV is the S3 API through the AWS SDK: PutObject, GetObject, DeleteObject.
type s3KV struct {
	c      *s3.Client
	bucket string
}

func newS3KV(endpoint, bucket string) *s3KV {
	return &s3KV{bucket: bucket, c: s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Retryer:      aws.NopRetryer{},
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: testAK, SecretAccessKey: testSK}, nil
		}),
		HTTPClient: &http.Client{},
	})}
}

func (s *s3KV) Get(key string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	out, err := s.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &key})
	var nsk *types.NoSuchKey
	if errors.As(err, &nsk) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	return string(b), err
}

func (s *s3KV) Put(key, value string) error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	_, err := s.c.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: &key, Body: bytes.NewReader([]byte(value))})
	return err
}

func (s *s3KV) Delete(key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	_, err := s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &key})
	return err
}

func (r *rig) bridges() []*bridge.Bridge {
	out := append([]*bridge.Bridge{r.filer, r.gateway, r.filerGRPC}, r.volumes...)
	if r.webdav != nil {
		out = append(out, r.webdav)
	}
	return append(out, r.extra...)
}

// faults injects one fault after another until done is closed: a pause, a
// blackhole or a drop of a bridge (held for hold), a kill of the master
// leader (started again after hold), or a partition of the master leader
// from the other masters (its Raft links cut for a few holds, long enough
// for it to lose its lease and the others to elect a new leader, while
// clients and volume servers still reach it). It runs on the test
// goroutine and returns what it did.
func (r *rig) faults(t *testing.T, done <-chan struct{}, seed uint64, hold time.Duration) map[string]int {
	rng := rand.New(rand.NewPCG(seed, 99))
	count := map[string]int{}
	all := r.bridges()
	name := func(b *bridge.Bridge) string {
		switch b {
		case r.filer:
			return "filer"
		case r.gateway:
			return "gateway"
		case r.filerGRPC:
			return "filer-grpc"
		case r.webdav:
			return "webdav"
		}
		if slices.Contains(r.extra, b) {
			return "filer2"
		}
		return "volume"
	}
	// wait is how faults are spaced and held: it returns early when the
	// workload ends.
	wait := func(d time.Duration) bool {
		select {
		case <-done:
			return false
		case <-time.After(d):
			return true
		}
	}
	for wait(hold / 3) {
		switch x := rng.IntN(12); {
		case x < 3:
			b := all[rng.IntN(len(all))]
			count["pause "+name(b)]++
			b.Pause()
			wait(hold)
			b.Resume()
		case x < 5:
			b := all[rng.IntN(len(all))]
			count["blackhole "+name(b)]++
			b.Blackhole()
			wait(hold)
			b.Resume()
		case x < 8:
			b := all[rng.IntN(len(all))]
			count["drop "+name(b)]++
			b.Drop()
		case x < 10:
			count["kill leader"]++
			l := r.c.KillLeader()
			wait(hold)
			l.Start(t)
		default:
			count["partition leader"]++
			r.c.PartitionMaster(r.c.Leader())
			wait(5 * hold)
			r.c.HealMasters()
		}
	}
	return count
}

// run drives the workload through s with faults and checks the history.
func (r *rig) run(t *testing.T, name string, s kv, prefix string, defOps int) {
	const clients, keys = 4, 5
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ops := opsWanted(t, defOps)
	rec := newRecorder()
	// Every key starts written, so the first reads are not all of absent keys.
	for k := 0; k < keys; k++ {
		rec.do(rec.newClient(), s, kvInput{Op: 'p', Key: fmt.Sprintf("%sk%d", prefix, k), Value: "init"})
	}
	done := workload(rec, s, prefix, clients, keys, ops, seed)
	count := r.faults(t, done, seed, 150*time.Millisecond)
	<-done
	t.Logf("faults: %v", count)
	for _, b := range r.bridges() {
		b.Resume()
	}
	r.c.HealMasters()
	rec.check(t, name)
}

// TestFilerHTTPLinearizable: PUT, GET and DELETE of small files through the
// filer HTTP API by concurrent clients, under faults, form a linearizable
// history of one register per path.
func TestFilerHTTPLinearizable(t *testing.T) {
	r := startRig(t)
	s := &filerKV{base: "http://" + r.filer.Addr(), hc: &http.Client{}}
	r.run(t, "filer-http", s, "", 300)
}

// TestS3Linearizable: PutObject, GetObject and DeleteObject through the S3
// gateway by concurrent clients, under faults, form a linearizable history
// of one register per key.
func TestS3Linearizable(t *testing.T) {
	r := startRig(t)
	s := newS3KV("http://"+r.gateway.Addr(), "linz")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("linz")}); err != nil {
		t.Fatal(err)
	}
	r.run(t, "s3", s, "", 300)
}

// TestWebDAVLinearizable: PUT, GET and DELETE through one WebDAV server (a
// filer view over gRPC) by concurrent clients, under faults (including
// between the view and the filer's gRPC port), form a linearizable history
// of one register per path, except that a read may find the file empty
// while a PUT runs (such reads are left out; TestWebDAVPutIsAtomic shows the
// bug). A read may also see a PUT's value before the PUT returns, which a
// register allows as long as the PUT does not fail.
//
// Known bug, so it runs only with KELP_LINZ_KNOWN_BUGS=1: x/net/webdav
// answers a GET 404 for any error opening the file, so while the view cannot
// reach the filer (a cut or blackholed gRPC link) an existing file reads as
// absent; about one run in eight at CI size catches one. A blackholed gRPC
// link can also hang a path for good (the PUT's commit has no deadline and
// holds the file's lock), which hangs the test's cleanup (docs/consistency.md).
func TestWebDAVLinearizable(t *testing.T) {
	if os.Getenv("KELP_LINZ_KNOWN_BUGS") != "1" {
		t.Skip("known bug: WebDAV GET answers 404 when the filer is unreachable; KELP_LINZ_KNOWN_BUGS=1 runs it")
	}
	r := startRig(t)
	r.startWebDAV(t)
	s := &filerKV{base: "http://" + r.webdav.Addr(), hc: &http.Client{}, dir: "/", emptyIsGap: true}
	r.run(t, "webdav", s, "", 300)
}

type atomicCounter struct{ n atomic.Uint64 }

func (c *atomicCounter) next() uint64 { return c.n.Add(1) }

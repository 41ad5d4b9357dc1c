package s3bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

func fakeConfig(endpoint string) Config {
	return Config{Endpoint: endpoint, AccessKey: "AK", SecretKey: "SK", Bucket: "bench", Seed: 7}
}

func TestRunSmallObjects(t *testing.T) {
	f, srv := newFakeS3(t)
	var out bytes.Buffer
	cfg := fakeConfig(srv.URL)
	cfg.Size, cfg.Count, cfg.Concurrency, cfg.JSON, cfg.Out = 1000, 200, 8, true, &out
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]struct{ req, failed int }{"put": {rep.Put.Requests, rep.Put.Failed}, "get": {rep.Get.Requests, rep.Get.Failed}} {
		if p.req != 200 || p.failed != 0 {
			t.Errorf("%s: %+v", name, p)
		}
	}
	if f.puts.Load() != 200 || f.gets.Load() != 200 || f.parts.Load() != 0 || f.rangedGets.Load() != 0 {
		t.Errorf("server saw %d puts, %d gets, %d parts, %d ranged gets; want 200, 200, 0, 0",
			f.puts.Load(), f.gets.Load(), f.parts.Load(), f.rangedGets.Load())
	}
	if f.signedPayloads.Load() > 1 { // only CreateBucket, whose body is empty, may be signed
		t.Errorf("%d requests signed their payload, want UNSIGNED-PAYLOAD", f.signedPayloads.Load())
	}
	// Every object is distinct and stamped with its index.
	seen := map[string]bool{}
	for k, b := range f.objects {
		if len(b) != 1000 {
			t.Fatalf("%s has %d bytes", k, len(b))
		}
		if seen[string(b)] {
			t.Fatalf("%s repeats another object's contents", k)
		}
		seen[string(b)] = true
	}
	p := rep.Get
	if !(0 < p.P50Ms && p.P50Ms <= p.P90Ms && p.P90Ms <= p.P99Ms && p.P99Ms <= p.MaxMs) || p.RequestsPerSec <= 0 {
		t.Errorf("get figures out of order: %+v", p)
	}
	if got := p.MBPerSec * 1e6 / 1000; got < p.RequestsPerSec*0.99 || got > p.RequestsPerSec*1.01 {
		t.Errorf("%.3f MB/s does not match %.1f objects/s of 1000 bytes", p.MBPerSec, p.RequestsPerSec)
	}

	// The last line is one JSON object with kelp benchmark's field names.
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var doc map[string]map[string]float64
	dec := json.NewDecoder(strings.NewReader(lines[len(lines)-1]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("last line %q: %v", lines[len(lines)-1], err)
	}
	want := []string{"requests", "failed", "requests_per_sec", "mb_per_sec", "p50_ms", "p90_ms", "p99_ms", "max_ms", "seconds"}
	for _, phase := range []string{"put", "get"} {
		if len(doc) != 2 || len(doc[phase]) != len(want) {
			t.Fatalf("JSON %v", doc)
		}
		for _, k := range want {
			if _, ok := doc[phase][k]; !ok {
				t.Errorf("JSON phase %s lacks %s", phase, k)
			}
		}
	}
	if doc["put"]["requests"] != 200 || doc["get"]["p99_ms"] != rep.Get.P99Ms {
		t.Errorf("JSON %v disagrees with %+v", doc, rep)
	}
}

func TestRunLargeObjectUsesMultipartAndRanges(t *testing.T) {
	f, srv := newFakeS3(t)
	cfg := fakeConfig(srv.URL)
	cfg.Size, cfg.Count, cfg.PartSize, cfg.PartConcurrency = 12<<20+5, 2, 5<<20, 3
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed() != 0 || rep.Put.Requests != 2 || rep.Get.Requests != 2 {
		t.Fatalf("%+v", rep)
	}
	// 12 MiB + 5 bytes in 5 MiB parts: 3 parts per object, 3 ranges per get.
	if f.puts.Load() != 0 || f.parts.Load() != 6 || f.completes.Load() != 2 || f.rangedGets.Load() != 6 {
		t.Errorf("server saw %d puts, %d parts, %d completes, %d ranged gets; want 0, 6, 2, 6",
			f.puts.Load(), f.parts.Load(), f.completes.Load(), f.rangedGets.Load())
	}
	c := newContent(cfg.Seed)
	for k, b := range f.objects {
		i := 0
		if strings.HasSuffix(k, "1") {
			i = 1
		}
		want := make([]byte, cfg.Size)
		c.fill(i, 0, want)
		if !bytes.Equal(b, want) {
			t.Errorf("%s: stored bytes differ from object %d's", k, i)
		}
	}
}

func TestRunCountsFailuresAndCorruption(t *testing.T) {
	f, srv := newFakeS3(t)
	f.failPut, f.corrupt = "00000003", "00000005"
	var out bytes.Buffer
	cfg := fakeConfig(srv.URL)
	cfg.Size, cfg.Count, cfg.Concurrency, cfg.Out = 4096, 10, 4, &out
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Object 3 fails to put and is not read; object 5 reads back corrupt.
	if rep.Put.Failed != 1 || rep.Get.Requests != 9 || rep.Get.Failed != 1 || rep.Failed() != 2 {
		t.Fatalf("%+v", rep)
	}
	if !strings.Contains(rep.Get.FirstError, "different bytes") || !strings.Contains(out.String(), "first error") {
		t.Errorf("get's first error %q; report:\n%s", rep.Get.FirstError, out.String())
	}
}

func TestVerifyCatchesShortLongAndForeignBodies(t *testing.T) {
	c := newContent(1)
	body := func(i int, off, n int64) []byte {
		b := make([]byte, n)
		c.fill(i, off, b)
		return b
	}
	buf := make([]byte, 64) // small, so bodies span several reads
	good := body(2, 10, 300)
	if err := c.verify(bytes.NewReader(good), 2, 10, 300, buf); err != nil {
		t.Fatalf("good body: %v", err)
	}
	for name, r := range map[string]io.Reader{
		"short":   bytes.NewReader(good[:299]),
		"long":    io.MultiReader(bytes.NewReader(good), strings.NewReader("x")),
		"foreign": bytes.NewReader(body(3, 10, 300)),
		"shifted": bytes.NewReader(body(2, 11, 300)),
	} {
		if err := c.verify(r, 2, 10, 300, buf); !errors.Is(err, errMismatch) {
			t.Errorf("%s body: %v, want errMismatch", name, err)
		}
	}
	// The stamp holds the index even where the template would repeat.
	if bytes.Equal(body(0, 0, 16), body(templateSize/objectShift+1, 0, 16)) {
		t.Error("stamps of different objects are equal")
	}
}

func TestObjectSeeksAndReadsAt(t *testing.T) {
	c := newContent(9)
	o := &object{c: c, i: 4, size: 100}
	if n, err := o.Seek(0, io.SeekEnd); n != 100 || err != nil {
		t.Fatalf("seek end: %d, %v", n, err)
	}
	o.Seek(0, io.SeekStart)
	all, err := io.ReadAll(o)
	if err != nil || len(all) != 100 {
		t.Fatalf("read %d bytes, %v", len(all), err)
	}
	p := make([]byte, 50)
	if n, err := o.ReadAt(p, 80); n != 20 || err != io.EOF || !bytes.Equal(p[:20], all[80:]) {
		t.Errorf("ReadAt tail: %d, %v", n, err)
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no endpoint":    {Bucket: "b", Count: 1},
		"not a URL":      {Endpoint: "127.0.0.1:8333", Bucket: "bbb", Count: 1},
		"no bucket":      {Endpoint: "http://x", Count: 1},
		"no objects":     {Endpoint: "http://x", Bucket: "bbb"},
		"tiny part size": {Endpoint: "http://x", Bucket: "bbb", Count: 1, PartSize: 1 << 20},
	} {
		if _, err := Run(context.Background(), cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

// TestRunAsksForEncryption: --sse=SSE-C sends the key with every PUT and
// GET, --sse=AES256 asks for it on every PUT; anything else is refused.
func TestRunAsksForEncryption(t *testing.T) {
	for _, tc := range []struct {
		sse          string
		wantC, want3 int64
	}{{"SSE-C", 20, 0}, {"AES256", 0, 10}} {
		f, srv := newFakeS3(t)
		cfg := fakeConfig(srv.URL)
		cfg.Size, cfg.Count, cfg.SSE = 100, 10, tc.sse
		rep, err := Run(context.Background(), cfg)
		if err != nil || rep.Failed() != 0 {
			t.Fatalf("%s: %v %+v", tc.sse, err, rep)
		}
		if f.sseC.Load() != tc.wantC || f.sseS3.Load() != tc.want3 {
			t.Errorf("%s: %d requests with SSE-C keys, %d with AES256; want %d and %d", tc.sse, f.sseC.Load(), f.sseS3.Load(), tc.wantC, tc.want3)
		}
	}
	cfg := fakeConfig("http://127.0.0.1:1")
	cfg.Count, cfg.SSE = 1, "rot13"
	if _, err := Run(context.Background(), cfg); !errors.Is(err, ErrConfig) {
		t.Fatalf("--sse=rot13: %v", err)
	}
}

// TestMatchesAgreesWithFill compares in place exactly what fill writes:
// across the stamp, the template's wrap and object boundaries, and not
// one flipped byte more.
func TestMatchesAgreesWithFill(t *testing.T) {
	c := newContent(7)
	for _, tc := range []struct {
		i      int
		off, n int64
	}{{0, 0, 5}, {1, 3, 40}, {2, 0, templateSize + 100}, {3, templateSize - 10, 30}, {9, 15, 2}, {4, 1 << 20, 1}} {
		b := make([]byte, tc.n)
		c.fill(tc.i, tc.off, b)
		if !c.matches(tc.i, tc.off, b) {
			t.Fatalf("%+v: fill's bytes do not match", tc)
		}
		if tc.n >= 8 && c.matches(tc.i+1, tc.off, b) {
			t.Fatalf("%+v: match another object's bytes", tc)
		}
		for _, at := range []int64{0, tc.n / 2, tc.n - 1} {
			b[at] ^= 1
			if c.matches(tc.i, tc.off, b) {
				t.Fatalf("%+v: byte %d flipped still matches", tc, at)
			}
			b[at] ^= 1
		}
	}
}

// Package suite is `kelp benchmark suite`: the workloads of issue 16 run
// side by side against one cluster, with the machine's own limits (synced
// disk write, loopback TCP single stream) measured in the same run, printed
// as one table of ratios to those limits.
package suite

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"html"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/kelpfs/kelp/internal/benchmark"
	"github.com/kelpfs/kelp/internal/benchmark/s3bench"
	"github.com/kelpfs/kelp/internal/security"
)

// Config says where the cluster is and how big the run is.
type Config struct {
	Masters   []string // for the 1 KiB `kelp benchmark` workload
	Filer     string   // host:port of a filer's HTTP API
	S3        string   // http://host:port; "" skips the S3 workloads
	AccessKey string
	SecretKey string
	// Scale multiplies every workload's size (1: the full issue sizes,
	// 0.05: a smoke run). Minimums keep each workload meaningful.
	Scale float64
	// Dir is where the disk-limit file is written (the volume servers'
	// disk, ideally); "" means os.TempDir().
	Dir         string
	Concurrency int // clients per workload; 0 means 16
	Out         io.Writer
	Progress    io.Writer
	// HTTPClient overrides the filer client (tests).
	HTTPClient *http.Client
}

// Row is one line of the table.
type Row struct {
	Workload string
	Phase    benchmark.Phase
	Limit    string  // "disk" or "tcp": what the ratio is to; "" none
	Ratio    float64 // MB/s over the limit's MB/s
	Note     string
}

// Result is a whole run.
type Result struct {
	DiskMBps, TCPMBps float64
	Rows              []Row
	// MultipartToPut is multipart POST files/s over PUT files/s.
	MultipartToPut float64
}

func scaled(full int, scale float64, least int) int {
	return max(least, int(float64(full)*scale))
}

// Run runs every workload in turn and prints the table.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Scale <= 0 {
		cfg.Scale = 1
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Dir == "" {
		cfg.Dir = os.TempDir()
	}
	res := &Result{}
	logf := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "bench-compare: "+format+"\n", args...)
		}
	}
	// A limit is what the machine can do: the best of three tries, so
	// that a moment of other load does not lower it.
	for try := 0; try < 3; try++ {
		logf("disk write limit (%d of 3)", try+1)
		mbps, err := DiskWriteMBps(cfg.Dir, int64(scaled(256, cfg.Scale, 16))<<20)
		if err != nil {
			return nil, err
		}
		res.DiskMBps = max(res.DiskMBps, mbps)
		logf("loopback TCP limit (%d of 3)", try+1)
		if mbps, err = TCPMBps(int64(scaled(2048, cfg.Scale, 64)) << 20); err != nil {
			return nil, err
		}
		res.TCPMBps = max(res.TCPMBps, mbps)
	}
	add := func(name, limit string, p benchmark.Phase, note string) {
		r := Row{Workload: name, Phase: p, Limit: limit, Note: note}
		switch limit {
		case "disk":
			r.Ratio = p.MBPerSec / res.DiskMBps
		case "tcp":
			r.Ratio = p.MBPerSec / res.TCPMBps
		}
		res.Rows = append(res.Rows, r)
	}

	if cfg.Filer != "" {
		logf("filer 64 KiB")
		put, mp, get, err := filerWorkloads(ctx, cfg, scaled(4000, cfg.Scale, 200))
		if err != nil {
			return nil, err
		}
		add("filer PUT 64 KiB", "disk", put, "")
		add("filer multipart POST 64 KiB", "disk", mp, "")
		add("filer GET 64 KiB", "tcp", get, "")
		if put.RequestsPerSec > 0 {
			res.MultipartToPut = mp.RequestsPerSec / put.RequestsPerSec
		}
	}
	if len(cfg.Masters) > 0 {
		logf("kelp benchmark 1 KiB")
		rep, err := benchmark.Run(ctx, benchmark.Config{
			Masters: cfg.Masters, N: scaled(40000, cfg.Scale, 1000), Size: 1024, Concurrency: cfg.Concurrency,
		})
		if err != nil {
			return nil, err
		}
		add("kelp benchmark write 1 KiB", "disk", rep.Write, "")
		add("kelp benchmark read 1 KiB", "tcp", rep.Read, "random order, warm")
	}
	if cfg.S3 != "" {
		s3cfg := s3bench.Config{
			Endpoint: cfg.S3, AccessKey: cfg.AccessKey, SecretKey: cfg.SecretKey,
			Bucket: "bench-compare", Cleanup: true, Concurrency: cfg.Concurrency,
		}
		logf("S3 1 MiB")
		c := s3cfg
		c.Size, c.Count = 1<<20, scaled(1000, cfg.Scale, 32)
		rep, err := s3bench.Run(ctx, c)
		if err != nil {
			return nil, err
		}
		add("S3 PUT 1 MiB", "disk", rep.Put, "")
		add("S3 GET 1 MiB", "tcp", rep.Get, "")
		logf("S3 one big object")
		c = s3cfg
		c.Size, c.Count, c.Concurrency = int64(scaled(1024, cfg.Scale, 32))<<20, 1, 1
		rep, err = s3bench.Run(ctx, c)
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("S3 GET one %d MiB object", c.Size>>20)
		add(name, "tcp", rep.Get, "ranged GETs, 8 in flight")
		logf("S3 ListObjectsV2")
		p, keys, err := listWorkload(ctx, s3cfg, scaled(20000, cfg.Scale, 2000), cleanup(cfg))
		if err != nil {
			return nil, err
		}
		add(fmt.Sprintf("S3 ListObjectsV2 %d keys", keys), "", p, "1,000 keys a page; latency = server time per page")
	}
	res.print(cfg.Out)
	return res, nil
}

func (res *Result) print(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "limit\tMB/s\t\n")
	fmt.Fprintf(tw, "disk write, 1 MiB writes + fsync (best of 3)\t%.1f\t\n", res.DiskMBps)
	fmt.Fprintf(tw, "loopback TCP, one stream (best of 3)\t%.1f\t\n", res.TCPMBps)
	tw.Flush()
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "workload\treq/s\tMB/s\tp50 ms\tp99 ms\tfailed\tratio to limit\tnote\n")
	for _, r := range res.Rows {
		ratio := "-"
		if r.Limit != "" {
			ratio = fmt.Sprintf("%.3f of %s", r.Ratio, r.Limit)
		}
		p := r.Phase
		fmt.Fprintf(tw, "%s\t%.1f\t%.2f\t%.3f\t%.3f\t%d\t%s\t%s\n", r.Workload, p.RequestsPerSec, p.MBPerSec, p.P50Ms, p.P99Ms, p.Failed, ratio, r.Note)
	}
	tw.Flush()
	if res.MultipartToPut > 0 {
		fmt.Fprintf(out, "\nfiler multipart POST / PUT (files/s): %.2f\n", res.MultipartToPut)
	}
}

// Err reports failed requests.
func (res *Result) Err() error {
	for _, r := range res.Rows {
		if r.Phase.Failed > 0 {
			return fmt.Errorf("benchmark: %s: %d of %d requests failed; the first: %s", r.Workload, r.Phase.Failed, r.Phase.Requests, r.Phase.FirstError)
		}
	}
	return nil
}

// DiskWriteMBps writes size bytes to a new file in dir in 1 MiB writes and
// fsyncs it (dd bs=1M conv=fsync), and removes it.
func DiskWriteMBps(dir string, size int64) (float64, error) {
	f, err := os.CreateTemp(dir, "bench-compare-dd-*")
	if err != nil {
		return 0, fmt.Errorf("disk limit: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 1<<20)
	rand.Read(buf)
	start := time.Now()
	for n := int64(0); n < size; n += int64(len(buf)) {
		if _, err := f.Write(buf); err != nil {
			return 0, fmt.Errorf("disk limit: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("disk limit: %w", err)
	}
	return float64(size) / 1e6 / time.Since(start).Seconds(), nil
}

// TCPMBps sends size bytes over one loopback TCP connection.
func TCPMBps(size int64) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	got := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err
			return
		}
		defer c.Close()
		_, err = io.Copy(io.Discard, c)
		got <- err
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	start := time.Now()
	for n := int64(0); n < size; n += int64(len(buf)) {
		if _, err := c.Write(buf); err != nil {
			c.Close()
			return 0, err
		}
	}
	c.Close()
	if err := <-got; err != nil {
		return 0, err
	}
	return float64(size) / 1e6 / time.Since(start).Seconds(), nil
}

func filerClient(cfg Config) *http.Client {
	if cfg.HTTPClient != nil {
		return cfg.HTTPClient
	}
	return &http.Client{Transport: &http.Transport{
		Proxy: nil, MaxIdleConns: 2 * cfg.Concurrency, MaxIdleConnsPerHost: 2 * cfg.Concurrency,
		DisableCompression: true,
	}}
}

// filerWorkloads PUTs n files of 64 KiB, POSTs n more as multipart forms
// to a directory, GETs the PUT ones back, then deletes the run's directory.
func filerWorkloads(ctx context.Context, cfg Config, n int) (put, mp, get benchmark.Phase, err error) {
	hc := filerClient(cfg)
	data := make([]byte, 64<<10)
	rand.Read(data)
	var nonce [6]byte
	rand.Read(nonce[:])
	dir := fmt.Sprintf("http://%s/bench-compare-%x", cfg.Filer, nonce)
	defer func() {
		req, _ := http.NewRequestWithContext(context.WithoutCancel(ctx), "DELETE", dir+"?recursive=true", nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	// Without a client of the caller's and without TLS, the requests go
	// through the lean HTTP/1.1 client of `kelp benchmark`, one per worker
	// (see docs/benchmark.md): net/http's client would take as much CPU
	// as a good part of the filer's own on the same cores.
	var lean []*benchmark.HTTP1
	if cfg.HTTPClient == nil && security.Scheme() == "http" {
		lean = make([]*benchmark.HTTP1, max(cfg.Concurrency, 1))
		for i := range lean {
			lean[i] = benchmark.NewHTTP1(ctx)
			defer lean[i].Close()
		}
	}
	prefix := strings.TrimPrefix(dir, "http://"+cfg.Filer)
	answers := make([][]byte, len(lean))
	leanDo := func(w int, method, target, headers string, body []byte, want int, wantBytes int64) (int64, error) {
		if answers[w] == nil {
			answers[w] = make([]byte, len(data)+1)
		}
		status, length, k, err := lean[w].Do(cfg.Filer, method, target, headers, body, answers[w])
		if err != nil {
			return 0, fmt.Errorf("%s %s: %w", method, target, err)
		}
		if status != want || (wantBytes >= 0 && length != wantBytes) {
			return 0, fmt.Errorf("%s %s: %d %s, %d bytes: %s", method, target, status, http.StatusText(status), length,
				bytes.TrimSpace(answers[w][:min(k, 200)]))
		}
		if wantBytes >= 0 && !bytes.Equal(answers[w][:k], data) {
			return 0, fmt.Errorf("%s %s: other bytes than were written", method, target)
		}
		return int64(len(data)), nil
	}
	do := func(req *http.Request, want int, wantBytes int64) (int64, error) {
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		k, err := io.Copy(io.Discard, resp.Body)
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != want || (wantBytes >= 0 && k != wantBytes) {
			return 0, fmt.Errorf("%s %s: %s, %d bytes", req.Method, req.URL.Path, resp.Status, k)
		}
		return int64(len(data)), nil
	}
	opts := benchmark.PhaseOptions{Name: "put", Unit: "file", Concurrency: cfg.Concurrency, Progress: cfg.Progress}
	put = benchmark.RunPhase(ctx, opts, n, func(w, i int) (int64, error) {
		if lean != nil {
			return leanDo(w, "PUT", fmt.Sprintf("%s/p%d/%d", prefix, i%32, i), "", data, http.StatusCreated, -1)
		}
		req, _ := http.NewRequestWithContext(ctx, "PUT", fmt.Sprintf("%s/p%d/%d", dir, i%32, i), bytes.NewReader(data))
		return do(req, http.StatusCreated, -1)
	})
	opts.Name = "multipart"
	mp = benchmark.RunPhase(ctx, opts, n, func(w, i int) (int64, error) {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		fw, _ := mw.CreateFormFile("file", fmt.Sprintf("%d", i))
		fw.Write(data)
		mw.Close()
		if lean != nil {
			return leanDo(w, "POST", fmt.Sprintf("%s/m%d/", prefix, i%32), "Content-Type: "+mw.FormDataContentType()+"\r\n",
				body.Bytes(), http.StatusCreated, -1)
		}
		req, _ := http.NewRequestWithContext(ctx, "POST", fmt.Sprintf("%s/m%d/", dir, i%32), &body)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		return do(req, http.StatusCreated, -1)
	})
	opts.Name = "get"
	get = benchmark.RunPhase(ctx, opts, n, func(w, i int) (int64, error) {
		j := (i * 7919) % n // not in write order
		if lean != nil {
			return leanDo(w, "GET", fmt.Sprintf("%s/p%d/%d", prefix, j%32, j), "", nil, http.StatusOK, int64(len(data)))
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/p%d/%d", dir, j%32, j), nil)
		return do(req, http.StatusOK, int64(len(data)))
	})
	if ctx.Err() != nil {
		return put, mp, get, ctx.Err()
	}
	return put, mp, get, nil
}

// listWorkload puts n empty objects under a fresh prefix and lists them
// with ListObjectsV2, 1,000 keys a page. Each page's latency is the
// request's round trip to the end of its body (server time on loopback):
// the pages are read raw and only their key count, truncation and token
// picked out after the clock stops, so no SDK's XML decoding (10 ms a page
// in the Go SDK, more in boto3) is counted as the server's.
func listWorkload(ctx context.Context, base s3bench.Config, n int, cleanup func(bucket, prefix string)) (benchmark.Phase, int, error) {
	var nonce [6]byte
	rand.Read(nonce[:])
	c := base
	c.Prefix = fmt.Sprintf("list-%x/", nonce)
	c.Size, c.Count, c.Cleanup = 1, n, false
	if _, err := s3bench.Run(ctx, c); err != nil {
		return benchmark.Phase{}, 0, err
	}
	start := time.Now()
	lat, keys, err := listPages(ctx, base, c.Prefix)
	if err != nil {
		return benchmark.Phase{}, keys, err
	}
	elapsed := time.Since(start)
	cleanup(base.Bucket, c.Prefix)
	if keys != n {
		return benchmark.Phase{}, keys, fmt.Errorf("list: %d keys, want %d", keys, n)
	}
	return pagePhase(lat, elapsed), keys, nil
}

// listPages lists the keys under prefix with ListObjectsV2, 1,000 a page,
// and returns each page's round trip and the number of keys.
func listPages(ctx context.Context, base s3bench.Config, prefix string) ([]time.Duration, int, error) {
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	creds := aws.Credentials{AccessKeyID: base.AccessKey, SecretAccessKey: base.SecretKey}
	signer := v4.NewSigner()
	var lat []time.Duration
	keys := 0
	token := ""
	for {
		q := url.Values{"list-type": {"2"}, "max-keys": {"1000"}, "prefix": {prefix}}
		if token != "" {
			q.Set("continuation-token", token)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base.Endpoint, "/")+"/"+base.Bucket+"?"+q.Encode(), nil)
		if err != nil {
			return lat, keys, fmt.Errorf("list: %w", err)
		}
		req.Header.Set("x-amz-content-sha256", "UNSIGNED-PAYLOAD")
		if err := signer.SignHTTP(ctx, creds, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
			return lat, keys, fmt.Errorf("list: %w", err)
		}
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return lat, keys, fmt.Errorf("list: %w", err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		lat = append(lat, time.Since(t0))
		if err != nil || resp.StatusCode != http.StatusOK {
			return lat, keys, fmt.Errorf("list: %s %v: %.200s", resp.Status, err, body)
		}
		keys += bytes.Count(body, []byte("<Key>"))
		if !bytes.Contains(body, []byte("<IsTruncated>true</IsTruncated>")) {
			return lat, keys, nil
		}
		if token = html.UnescapeString(xmlText(body, "NextContinuationToken")); token == "" {
			return lat, keys, fmt.Errorf("list: a truncated page without NextContinuationToken")
		}
	}
}

// xmlText returns the text of the first element named name in doc, still
// escaped; "" if there is none.
func xmlText(doc []byte, name string) string {
	_, rest, ok := bytes.Cut(doc, []byte("<"+name+">"))
	if !ok {
		return ""
	}
	text, _, _ := bytes.Cut(rest, []byte("</"+name+">"))
	return string(text)
}

func pagePhase(lat []time.Duration, elapsed time.Duration) benchmark.Phase {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))]) / 1e6
	}
	return benchmark.Phase{
		Requests: len(lat), Seconds: elapsed.Seconds(), RequestsPerSec: float64(len(lat)) / elapsed.Seconds(),
		P50Ms: pct(0.5), P90Ms: pct(0.9), P99Ms: pct(0.99), MaxMs: float64(lat[len(lat)-1]) / 1e6,
	}
}

// cleanup removes a listed prefix through the filer, in one recursive
// delete of its directory under the default bucket root (the S3 API would
// take a request per 1,000 keys); without a filer the objects stay.
func cleanup(cfg Config) func(bucket, prefix string) {
	return func(bucket, prefix string) {
		if cfg.Filer == "" {
			return
		}
		req, _ := http.NewRequest("DELETE", fmt.Sprintf("http://%s/buckets/%s/%s?recursive=true", cfg.Filer, bucket, prefix), nil)
		if resp, err := filerClient(cfg).Do(req); err == nil {
			resp.Body.Close()
		}
	}
}

package s3

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/kelpfs/kelp/internal/objectapi"
)

// listBenchKeys is the bucket size of BenchmarkListObjectsPage:
// KELP_LIST_BENCH_KEYS, default 20,000 (the boto3 workload).
func listBenchKeys(b *testing.B) int {
	n := 20000
	if v := os.Getenv("KELP_LIST_BENCH_KEYS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1000 {
			b.Fatalf("KELP_LIST_BENCH_KEYS=%q: want an integer >= 1000", v)
		}
	}
	return n
}

// listBenchKey is the i-th key: 20 prefixes so that a delimiter listing
// has something to roll up, keys in order within each.
func listBenchKey(i int) string { return fmt.Sprintf("p%02d/key-%08d", i%20, i) }

// fillListBench stores n empty objects in bucket through the layer (the
// HTTP path would only make the set-up slower).
func fillListBench(b *testing.B, e *env, bucket string, n int) {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				_, err := e.gw.layer.PutObject(e.ctx, bucket, listBenchKey(i), bytes.NewReader(nil), objectapi.PutOptions{Size: 0})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkListObjectsPage lists pages of 1,000 keys (ListObjectsV2,
// ListObjects, ListObjectVersions) and a delimiter listing, each page at
// a different position in the bucket, with a plain HTTP client that
// discards the body: the figure is the gateway's and filer's work, not
// an SDK's XML parsing. cpu-µs/op is the process's CPU time per page.
func BenchmarkListObjectsPage(b *testing.B) {
	n := listBenchKeys(b)
	e := startEnv(b, nil)
	e.mkBucket("listbench")
	fillListBench(b, e, "listbench", n)
	// Page starts: every 1,000th key in key order (prefix p00 first).
	var starts []string
	for p := range 20 {
		for i := p; i < n; i += 20 * 1000 {
			starts = append(starts, listBenchKey(i))
		}
	}
	cases := []struct {
		name  string
		query func(start string) string
		want  string // a fragment every page has
	}{
		{"v2", func(s string) string { return "list-type=2&start-after=" + url.QueryEscape(s) }, "<KeyCount>1000</KeyCount>"},
		{"v1", func(s string) string { return "marker=" + url.QueryEscape(s) }, "<IsTruncated>true</IsTruncated>"},
		{"versions", func(s string) string { return "versions&key-marker=" + url.QueryEscape(s) }, "<IsTruncated>true</IsTruncated>"},
		{"delimiter", func(string) string { return "list-type=2&delimiter=%2F" }, "<CommonPrefixes>"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			client := &http.Client{}
			signer := v4.NewSigner()
			creds := aws.Credentials{AccessKeyID: testAK, SecretAccessKey: testSK}
			var buf bytes.Buffer
			i := 0
			cpu0 := cpuTime()
			for b.Loop() {
				start := starts[i%len(starts)]
				if i%len(starts) == len(starts)-1 {
					start = starts[0] // the last start may not have a full page after it
				}
				i++
				req, _ := http.NewRequest("GET", e.gw.URL()+"/listbench?"+c.query(start), nil)
				req.Header.Set("x-amz-content-sha256", "UNSIGNED-PAYLOAD")
				if err := signer.SignHTTP(e.ctx, creds, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
					b.Fatal(err)
				}
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				buf.Reset()
				_, err = io.Copy(&buf, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || !bytes.Contains(buf.Bytes(), []byte(c.want)) {
					b.Fatalf("%s: %s, %v: %.300s", c.name, resp.Status, err, buf.Bytes())
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

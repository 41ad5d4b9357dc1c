package benchmark

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/client/clienttest"
)

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestRunWritesAndReadsEverything(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Servers: 2, Volumes: 4})
	var out, prog bytes.Buffer
	rep, err := Run(context.Background(), Config{
		Masters: []string{cl.Master.URL}, N: 300, Size: 1000, Concurrency: 8,
		Collection: "bench", JSON: true, Out: &out, Progress: &prog,
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]Phase{"write": rep.Write, "read": rep.Read} {
		if p.Requests != 300 || p.Failed != 0 || p.FirstError != "" {
			t.Errorf("%s: %+v", name, p)
		}
		if p.RequestsPerSec <= 0 || p.MBPerSec <= 0 || p.Seconds <= 0 {
			t.Errorf("%s: no throughput: %+v", name, p)
		}
		if !(0 < p.P50Ms && p.P50Ms <= p.P90Ms && p.P90Ms <= p.P99Ms && p.P99Ms <= p.MaxMs) {
			t.Errorf("%s: percentiles out of order: %+v", name, p)
		}
		// MB/s and requests/s describe the same bytes.
		if got := p.MBPerSec * 1e6 / 1000; got < p.RequestsPerSec*0.99 || got > p.RequestsPerSec*1.01 {
			t.Errorf("%s: %.1f MB/s does not match %.1f req/s of 1000 bytes", name, p.MBPerSec, p.RequestsPerSec)
		}
	}
	if n := cl.NeedleCount(); n != 300 {
		t.Errorf("%d needles stored, want 300", n)
	}
	if n := cl.Master.Assigns.Load(); n != 300 {
		t.Errorf("%d assigns, want exactly one per file", n)
	}
	if r := cl.Servers[0].Reads.Load() + cl.Servers[1].Reads.Load(); r != 300 {
		t.Errorf("%d reads served, want 300", r)
	}
	if !strings.Contains(cl.Master.LastAssignQuery(), "collection=bench") {
		t.Errorf("assign query %q lacks the collection", cl.Master.LastAssignQuery())
	}
	if prog.Len() == 0 {
		t.Error("no progress drawn")
	}

	text := out.String()
	for _, want := range []string{"write:  300 requests, 0 failed", "read:   300 requests, 0 failed", "latency ms: p50"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	// The last line is exactly one JSON object with the documented keys.
	var doc map[string]map[string]float64
	dec := json.NewDecoder(strings.NewReader(lastLine(text)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("last line %q: %v", lastLine(text), err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("more than one JSON value on the last line")
	}
	keys := []string{"failed", "max_ms", "mb_per_sec", "p50_ms", "p90_ms", "p99_ms", "requests", "requests_per_sec", "seconds"}
	for _, phase := range []string{"write", "read"} {
		var got []string
		for k := range doc[phase] {
			got = append(got, k)
		}
		if len(doc) != 2 || !sameSet(got, keys) {
			t.Fatalf("JSON %v: phase %s keys %v", doc, phase, got)
		}
	}
	if doc["write"]["requests"] != 300 || doc["read"]["p99_ms"] != rep.Read.P99Ms {
		t.Errorf("JSON %v disagrees with report %+v", doc, rep)
	}
}

func sameSet(a, b []string) bool {
	m := map[string]bool{}
	for _, s := range a {
		m[s] = true
	}
	for _, s := range b {
		if !m[s] {
			return false
		}
	}
	return len(a) == len(b)
}

func TestRunCountsFailures(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Servers: 1, Volumes: 2})
	var writes, reads atomic.Int32
	cl.Servers[0].SetHook(func(w http.ResponseWriter, r *http.Request) bool {
		switch r.Method {
		case http.MethodPut, http.MethodPost:
			if writes.Add(1)%10 == 0 { // every 10th write: volume full
				io.Copy(io.Discard, r.Body)
				clienttest.WriteError(w, http.StatusInsufficientStorage, "volume full")
				return true
			}
		case http.MethodGet:
			switch n := reads.Add(1); {
			case n%9 == 0:
				clienttest.WriteError(w, http.StatusInternalServerError, "injected")
				return true
			case n%9 == 1: // right size, wrong bytes: only the checksum sees it
				w.Header().Set("Content-Length", "64")
				w.Write(make([]byte, 64))
				return true
			}
		}
		return false
	})
	var out bytes.Buffer
	rep, err := Run(context.Background(), Config{
		Masters: []string{cl.Master.URL}, N: 200, Size: 64, Concurrency: 4, JSON: true, Out: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Write.Requests != 200 || rep.Write.Failed != 20 {
		t.Fatalf("write phase %+v, want 200 requests and 20 failed", rep.Write)
	}
	if n := cl.Master.Assigns.Load(); n != 200 {
		t.Fatalf("%d assigns: a failed write was retried", n)
	}
	// Reads 1, 10, 19, ... (n%9==1) give wrong bytes, 9, 18, ... fail:
	// 20 + 20 of the 180 reads.
	if rep.Read.Requests != 180 || rep.Read.Failed != 40 {
		t.Fatalf("read phase %+v, want 180 requests and 40 failed", rep.Read)
	}
	if rep.Failed() != 60 {
		t.Fatalf("Failed() = %d", rep.Failed())
	}
	if !strings.Contains(out.String(), "first error:") {
		t.Errorf("report does not show an error:\n%s", out.String())
	}
	var doc Report
	if err := json.Unmarshal([]byte(lastLine(out.String())), &doc); err != nil {
		t.Fatal(err)
	}
	rep.Write.FirstError, rep.Read.FirstError = "", ""
	if !reflect.DeepEqual(&doc, rep) {
		t.Fatalf("JSON %+v != report %+v", doc, *rep)
	}
}

func TestRunZeroSizeAndUnreachableMaster(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	rep, err := Run(context.Background(), Config{Masters: []string{cl.Master.URL}, N: 10, Size: 0})
	if err != nil || rep.Write.Failed+rep.Read.Failed != 0 || rep.Read.Requests != 10 {
		t.Fatalf("empty files: %+v, %v", rep, err)
	}

	cl.Master.Close()
	rep, err = Run(context.Background(), Config{Masters: []string{cl.Master.URL}, N: 5, Size: 10})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Write.Failed != 5 || rep.Read.Requests != 0 || !strings.Contains(rep.Write.FirstError, "no master") {
		t.Fatalf("with the master down: %+v", rep)
	}
}

func TestRunStopsWithContext(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cl.Master.SetHook(func(w http.ResponseWriter, r *http.Request) bool {
		if cl.Master.Assigns.Load() >= 50 {
			cancel()
		}
		return false
	})
	start := time.Now()
	rep, err := Run(ctx, Config{Masters: []string{cl.Master.URL}, N: 1_000_000, Size: 10, Concurrency: 2})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if rep == nil || rep.Write.Requests < 50 || rep.Write.Requests > 1000 || time.Since(start) > 10*time.Second {
		t.Fatalf("partial report %+v after %v", rep, time.Since(start))
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{N: 1},
		{Masters: []string{" , "}, N: 1},
		{Masters: []string{"m:1"}, N: 0},
		{Masters: []string{"m:1"}, N: 1, Size: -1},
		{Masters: []string{"m:1"}, N: 1, Concurrency: -2},
	} {
		if _, err := Run(context.Background(), cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("Run(%+v) = %v, want ErrConfig", cfg, err)
		}
	}
}

func TestSummarize(t *testing.T) {
	ms := int64(time.Millisecond)
	lat := make([]int64, 0, 102)
	for i := 100; i >= 1; i-- { // 1..100 ms, unsorted
		lat = append(lat, int64(i)*ms)
	}
	lat = append(lat, -1, -1) // two failures are not latencies
	p := summarize(lat, 2, 100*4096, 2*time.Second)
	want := Phase{Requests: 102, Failed: 2, RequestsPerSec: 50, MBPerSec: 0.205,
		P50Ms: 50, P90Ms: 90, P99Ms: 99, MaxMs: 100, Seconds: 2}
	if p != want {
		t.Fatalf("summarize = %+v\nwant        %+v", p, want)
	}
	if p := summarize([]int64{-1}, 1, 0, time.Second); p != (Phase{Requests: 1, Failed: 1, Seconds: 1}) {
		t.Fatalf("all failed: %+v", p)
	}
	if p := summarize([]int64{3 * ms}, 0, 1, time.Second); p.P50Ms != 3 || p.P99Ms != 3 || p.MaxMs != 3 {
		t.Fatalf("one sample: %+v", p)
	}
}

// BenchmarkRun runs the whole benchmark against the in-process fake cluster
// (client and servers share the CPU) and reports both phases' rates.
func BenchmarkRun(b *testing.B) {
	cl := clienttest.NewCluster(b, clienttest.Options{Servers: 2, Volumes: 8})
	for b.Loop() {
		rep, err := Run(context.Background(), Config{Masters: []string{cl.Master.URL}, N: 20000, Size: 1024, Concurrency: 32})
		if err != nil || rep.Failed() != 0 {
			b.Fatalf("%+v, %v", rep, err)
		}
		b.ReportMetric(rep.Write.RequestsPerSec, "writes/s")
		b.ReportMetric(rep.Read.RequestsPerSec, "reads/s")
	}
}

// TestSaveAndReadAgain: --save lists the files written; --reads-from reads
// exactly those again without writing; a bad list is a config error.
func TestSaveAndReadAgain(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Servers: 2, Volumes: 4})
	list := t.TempDir() + "/files"
	if _, err := Run(context.Background(), Config{Masters: []string{cl.Master.URL}, N: 50, Size: 700, Save: list}); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), Config{Masters: []string{cl.Master.URL}, ReadsFrom: list, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Write.Requests != 0 || rep.Read.Requests != 50 || rep.Read.Failed != 0 {
		t.Fatalf("read again: write %+v read %+v", rep.Write, rep.Read)
	}
	if n := cl.NeedleCount(); n != 50 {
		t.Fatalf("%d needles after reading again, want 50", n)
	}
	bad := t.TempDir() + "/bad"
	os.WriteFile(bad, []byte("not a list\n"), 0o644)
	if _, err := Run(context.Background(), Config{Masters: []string{cl.Master.URL}, ReadsFrom: bad}); !errors.Is(err, ErrConfig) {
		t.Fatalf("a bad list: %v", err)
	}
}

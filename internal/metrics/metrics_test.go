package metrics

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// value is a counter's or gauge's value.
func value(m prometheus.Metric) float64 {
	var d dto.Metric
	m.Write(&d)
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

// count is the number of series a collector has.
func count(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	n := 0
	for range ch {
		n++
	}
	return n
}

func serveOnce(t testing.TB, h http.Handler, method, url string, body io.Reader) *http.Response {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest(method, srv.URL+url, body)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestMiddlewareCountsRequestsBytesAndCodes(t *testing.T) {
	r := New()
	h := r.HTTP("volume", nil, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		if req.Method == http.MethodPut {
			w.WriteHeader(http.StatusCreated)
		}
		w.Write(bytes.Repeat([]byte("x"), 2*len(b)))
	}))
	serveOnce(t, h, http.MethodPut, "/a", strings.NewReader("hello"))
	serveOnce(t, h, http.MethodPut, "/b", strings.NewReader("world!"))
	serveOnce(t, h, http.MethodGet, "/a", nil)
	m := r.httpVecs()
	if got := value(m.requests.WithLabelValues("volume", "PUT", "201")); got != 2 {
		t.Errorf("PUT 201 = %v, want 2", got)
	}
	if got := value(m.requests.WithLabelValues("volume", "GET", "200")); got != 1 {
		t.Errorf("GET 200 = %v, want 1", got)
	}
	if got := value(m.bytesIn.WithLabelValues("volume", "PUT")); got != 11 {
		t.Errorf("bytes in = %v, want 11", got)
	}
	if got := value(m.bytesOut.WithLabelValues("volume", "PUT")); got != 22 {
		t.Errorf("bytes out = %v, want 22", got)
	}
	if got := count(m.latency); got != 2 {
		t.Errorf("latency series = %d, want 2 (PUT, GET)", got)
	}
	if got := value(m.inFlight.WithLabelValues("volume")); got != 0 {
		t.Errorf("in flight = %v after the requests", got)
	}
}

func TestSetOperationAndPanic(t *testing.T) {
	r := New()
	h := r.HTTP("s3", func(*http.Request) string { return "unrouted" }, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// A wrapper of the writer, as the S3 gateway has.
		ww := struct{ unwrapper }{unwrapper{w}}
		SetOperation(ww, "GetObject")
		if req.URL.Path == "/panic" {
			panic("boom")
		}
		w.WriteHeader(http.StatusNotFound)
	}))
	serveOnce(t, h, http.MethodGet, "/b/k", nil)
	// net/http recovers the panic and cuts the connection: the request
	// still counts, as a 500.
	srv := httptest.NewServer(h)
	srv.Config.ErrorLog = nil
	http.Get(srv.URL + "/panic")
	srv.Close()
	m := r.httpVecs()
	if got := value(m.requests.WithLabelValues("s3", "GetObject", "404")); got != 1 {
		t.Errorf("GetObject 404 = %v, want 1", got)
	}
	if got := value(m.requests.WithLabelValues("s3", "GetObject", "500")); got != 1 {
		t.Errorf("GetObject 500 (panic) = %v, want 1", got)
	}
}

type unwrapper struct{ http.ResponseWriter }

func (u unwrapper) Unwrap() http.ResponseWriter { return u.ResponseWriter }

func TestMethodOpIsBounded(t *testing.T) {
	for _, m := range []string{"GET", "PROPFIND", "BREW", strings.Repeat("X", 100)} {
		op := MethodOp(&http.Request{Method: m})
		if op != m && op != "OTHER" {
			t.Errorf("MethodOp(%q) = %q", m, op)
		}
	}
	if MethodOp(&http.Request{Method: "BREW"}) != "OTHER" {
		t.Error("an unknown method is not OTHER")
	}
}

func TestNilRegistryLeavesHandler(t *testing.T) {
	var r *Registry
	h := http.NotFoundHandler()
	if got := r.HTTP("x", nil, h); got == nil {
		t.Fatal("nil handler")
	}
	if r.GRPCOptions("x") != nil {
		t.Fatal("options from a nil registry")
	}
}

func TestRegistryHasRuntimeAndNames(t *testing.T) {
	r := New()
	r.HTTP("filer", nil, http.NotFoundHandler())
	fams, err := r.Prometheus().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range fams {
		names = append(names, f.GetName())
	}
	for _, want := range []string{"go_goroutines", "process_cpu_seconds_total", "kelp_build_info"} {
		if !slices.Contains(names, want) {
			t.Errorf("%s not gathered", want)
		}
	}
	// Request families have no series before the first request, but are
	// registered.
	kn := r.KelpNames()
	for _, want := range []string{"kelp_build_info", "kelp_http_requests_total", "kelp_http_request_duration_seconds"} {
		if !slices.Contains(kn, want) {
			t.Errorf("KelpNames lacks %s: %v", want, kn)
		}
	}
}

// TestAlertRules checks deploy/prometheus/rules.yml with promtool (syntax)
// and runs its unit tests (rules_test.yml: each alert fires when it
// should). scripts/test-deps.sh installs promtool (Debian package
// prometheus).
func TestAlertRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (scripts/test-deps.sh installs it)")
	}
	for _, args := range [][]string{{"check", "rules", "rules.yml"}, {"test", "rules", "rules_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "../../deploy/prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// BenchmarkMiddleware is the per-request cost of the measuring middleware
// (no network: the handler is called directly).
func BenchmarkMiddleware(b *testing.B) {
	body := []byte("0123456789")
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write(body)
	})
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{{"bare", inner}, {"measured", New().HTTP("volume", nil, inner)}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			req := httptest.NewRequest(http.MethodPut, "/3,01637037d6", nil)
			w := httptest.NewRecorder()
			for b.Loop() {
				req.Body = io.NopCloser(bytes.NewReader(body))
				w.Body.Reset()
				bc.h.ServeHTTP(w, req)
			}
		})
	}
}

package metrics

import (
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const readHeaderTimeout = 10 * time.Second

type httpMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	bytesIn  *prometheus.CounterVec
	bytesOut *prometheus.CounterVec
	inFlight *prometheus.GaugeVec
}

func (r *Registry) httpVecs() *httpMetrics {
	r.httpOnce.Do(func() {
		m := &httpMetrics{
			requests: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "kelp_http_requests_total", Help: "HTTP requests answered, by API, operation and status code.",
			}, []string{"api", "op", "code"}),
			latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
				Name: "kelp_http_request_duration_seconds", Help: "Time from a request's headers to the end of its answer.",
				Buckets: latencyBuckets,
			}, []string{"api", "op"}),
			bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "kelp_http_request_bytes_total", Help: "Request body bytes read by handlers.",
			}, []string{"api", "op"}),
			bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "kelp_http_response_bytes_total", Help: "Response body bytes written.",
			}, []string{"api", "op"}),
			inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
				Name: "kelp_http_requests_in_flight", Help: "HTTP requests being served.",
			}, []string{"api"}),
		}
		r.MustRegister(m.requests, m.latency, m.bytesIn, m.bytesOut, m.inFlight)
		r.http = m
	})
	return r.http
}

// opSeries are one (api, op)'s metrics, resolved once.
type opSeries struct {
	latency  prometheus.Observer
	bytesIn  prometheus.Counter
	bytesOut prometheus.Counter
	codes    sync.Map // int -> prometheus.Counter
}

// Middleware measures one API's requests.
type Middleware struct {
	api      string
	vecs     *httpMetrics
	inFl     prometheus.Gauge
	classify func(*http.Request) string
	ops      sync.Map // string -> *opSeries
}

// HTTP returns h measured as api; classify names a request's operation (it
// must return one of a small fixed set of names; nil: the method). A
// handler can name the operation itself, once it knows it, with
// SetOperation. A nil registry returns h unchanged.
func (r *Registry) HTTP(api string, classify func(*http.Request) string, h http.Handler) http.Handler {
	if r == nil {
		return h
	}
	vecs := r.httpVecs()
	if classify == nil {
		classify = MethodOp
	}
	m := &Middleware{api: api, vecs: vecs, inFl: vecs.inFlight.WithLabelValues(api), classify: classify}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { m.serve(h, w, req) })
}

func (m *Middleware) series(op string) *opSeries {
	if s, ok := m.ops.Load(op); ok {
		return s.(*opSeries)
	}
	s := &opSeries{
		latency:  m.vecs.latency.WithLabelValues(m.api, op),
		bytesIn:  m.vecs.bytesIn.WithLabelValues(m.api, op),
		bytesOut: m.vecs.bytesOut.WithLabelValues(m.api, op),
	}
	actual, _ := m.ops.LoadOrStore(op, s)
	return actual.(*opSeries)
}

func (s *opSeries) count(vecs *httpMetrics, api, op string, code int) {
	if c, ok := s.codes.Load(code); ok {
		c.(prometheus.Counter).Inc()
		return
	}
	c := vecs.requests.WithLabelValues(api, op, strconv.Itoa(code))
	s.codes.Store(code, c)
	c.Inc()
}

func (m *Middleware) serve(h http.Handler, w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	m.inFl.Inc()
	rw := &responseWriter{ResponseWriter: w, op: m.classify(r)}
	var body *countingBody
	if r.Body != nil && r.Body != http.NoBody {
		body = &countingBody{ReadCloser: r.Body}
		r.Body = body
	}
	finished := false
	defer func() {
		m.inFl.Dec()
		code := rw.code
		if !finished && !rw.wrote {
			code = http.StatusInternalServerError // a panic: httpserve.Recover answers 500
		} else if code == 0 {
			code = http.StatusOK
		}
		s := m.series(rw.op)
		s.count(m.vecs, m.api, rw.op, code)
		s.latency.Observe(time.Since(start).Seconds())
		if body != nil && body.n > 0 {
			s.bytesIn.Add(float64(body.n))
		}
		if rw.n > 0 {
			s.bytesOut.Add(float64(rw.n))
		}
	}()
	h.ServeHTTP(rw, r)
	finished = true
}

// MethodOp names an operation by its HTTP method (unknown methods are
// "OTHER", so that a client cannot grow the label set).
func MethodOp(r *http.Request) string {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPost, http.MethodDelete,
		http.MethodOptions, http.MethodPatch,
		"PROPFIND", "PROPPATCH", "MKCOL", "COPY", "MOVE", "LOCK", "UNLOCK":
		return r.Method
	}
	return "OTHER"
}

// SetOperation names the operation of the request w answers, for a
// handler that knows it only after routing (the S3 gateway). w is the
// writer the handler was given, or one wrapping it (with Unwrap).
func SetOperation(w http.ResponseWriter, op string) {
	for {
		switch t := w.(type) {
		case *responseWriter:
			t.op = op
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return
		}
	}
}

type countingBody struct {
	io.ReadCloser
	n int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}

// responseWriter records the status and the bytes written. It passes
// Flush and ReadFrom (sendfile) through; Unwrap lets
// http.ResponseController reach the rest.
type responseWriter struct {
	http.ResponseWriter
	op    string
	code  int
	wrote bool
	n     int64
}

func (w *responseWriter) WriteHeader(code int) {
	if code >= 200 && !w.wrote { // 1xx answers are interim
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.code, w.wrote = http.StatusOK, true
	}
	n, err := w.ResponseWriter.Write(p)
	w.n += int64(n)
	return n, err
}

func (w *responseWriter) ReadFrom(r io.Reader) (int64, error) {
	if !w.wrote {
		w.code, w.wrote = http.StatusOK, true
	}
	var n int64
	var err error
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(r)
	} else {
		n, err = io.Copy(w.ResponseWriter, r)
	}
	w.n += n
	return n, err
}

func (w *responseWriter) Flush() {
	if !w.wrote {
		w.code, w.wrote = http.StatusOK, true
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// OpRecorder counts the requests of one (api, op) that a server answers
// outside net/http (the volume server's fast read path, see
// volumeserver/fastread.go), into the same series as Registry.HTTP's.
type OpRecorder struct {
	inFl     prometheus.Gauge
	requests prometheus.Counter
	latency  prometheus.Observer
	bytesOut prometheus.Counter
}

// HTTPOp returns the recorder of api's op answered with code. A nil
// registry returns nil, whose methods do nothing.
func (r *Registry) HTTPOp(api, op string, code int) *OpRecorder {
	if r == nil {
		return nil
	}
	v := r.httpVecs()
	return &OpRecorder{
		inFl:     v.inFlight.WithLabelValues(api),
		requests: v.requests.WithLabelValues(api, op, strconv.Itoa(code)),
		latency:  v.latency.WithLabelValues(api, op),
		bytesOut: v.bytesOut.WithLabelValues(api, op),
	}
}

// Start counts a request in flight.
func (o *OpRecorder) Start() {
	if o != nil {
		o.inFl.Inc()
	}
}

// Done counts a request answered d after its headers, with out body bytes.
func (o *OpRecorder) Done(d time.Duration, out int64) {
	if o == nil {
		return
	}
	o.inFl.Dec()
	o.requests.Inc()
	o.latency.Observe(d.Seconds())
	if out > 0 {
		o.bytesOut.Add(float64(out))
	}
}

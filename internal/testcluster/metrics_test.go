package testcluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/fsview"
	"github.com/kelpfs/kelp/internal/metrics"
	kelps3 "github.com/kelpfs/kelp/internal/s3"
	"github.com/kelpfs/kelp/internal/testcluster"
	"github.com/kelpfs/kelp/internal/webdav"
)

// scrape fetches url and parses the Prometheus text format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return fams
}

// sum adds the values of family name's series whose labels include want.
func sum(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	total := 0.0
	for _, m := range f.Metric {
		ok := true
		for k, v := range want {
			found := false
			for _, l := range m.Label {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			ok = ok && found
		}
		if !ok {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		}
	}
	return total
}

func kelpFamilies(fams map[string]*dto.MetricFamily) int {
	n := 0
	for name := range fams {
		if strings.HasPrefix(name, "kelp_") {
			n++
		}
	}
	return n
}

type process struct {
	name string
	reg  *metrics.Registry
	url  string // its /metrics, served on loopback
}

// TestMetricsEveryProcess scrapes every kind of server (three masters, two
// volume servers, a filer, the S3 gateway, WebDAV), each on its own
// registry as separate processes would be: each serves kelp_ families and
// the Go runtime's, and its request counters move when requests are made.
// It then checks deploy/grafana/kelp.json refers only to families that
// exist (TestDashboardMetricsExist needs the registries this test builds).
func TestMetricsEveryProcess(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Masters: 3, Volumes: []testcluster.VolumeSpec{{}, {}}, DefaultReplication: "001"})
	log := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := func(r interface{ Run(context.Context) error }) {
		done := make(chan struct{})
		go func() { defer close(done); r.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	fs, err := filerserver.New(filerserver.Config{IP: "127.0.0.1", Masters: c.MasterAddrs(), Dir: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	run(fs)
	const ak, sk = "AKIDMETRICS", "metrics-secret-key"
	gw, err := kelps3.New(kelps3.Config{IP: "127.0.0.1", Namespace: fs.Filer(), Logger: log, LifecycleInterval: -1,
		Identities: []kelps3.Identity{{Name: "admin", Credentials: []kelps3.Credential{{AccessKey: ak, SecretKey: sk}}, Actions: []string{"Admin"}}}})
	if err != nil {
		t.Fatal(err)
	}
	run(gw)
	dav, err := webdav.New(webdav.Config{IP: "127.0.0.1", Logger: log, View: fsview.Config{Filer: fs.GRPCAddr(), ConnectTimeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	run(dav)

	var procs []process
	add := func(name string, reg *metrics.Registry) {
		srv := httptest.NewServer(reg.Handler())
		t.Cleanup(srv.Close)
		procs = append(procs, process{name, reg, srv.URL + "/metrics"})
	}
	for i, m := range c.Masters {
		add(fmt.Sprintf("master%d", i), m.Master().Metrics())
	}
	for i, v := range c.Volume {
		add(fmt.Sprintf("volume%d", i), v.VolumeServer().Metrics())
	}
	add("filer", fs.Metrics())
	add("s3", gw.Metrics())
	add("webdav", dav.Metrics())

	before := map[string]map[string]*dto.MetricFamily{}
	for _, p := range procs {
		before[p.name] = scrape(t, p.url)
	}

	// Requests of every API.
	leader := c.Leader()
	cl, err := client.New(client.Config{Masters: c.MasterAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		a, err := cl.Assign(ctx, client.AssignRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Upload(ctx, a.URL, a.FID, bytes.NewReader(bytes.Repeat([]byte{byte(i)}, 1000)), 1000, client.UploadOptions{}); err != nil {
			t.Fatal(err)
		}
		rc, _, err := cl.Get(ctx, a.FID, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, rc)
		rc.Close()
	}
	resp, err := http.Get("http://" + leader.Addr + "/dir/assign")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	req, _ := http.NewRequest(http.MethodPut, "http://"+fs.Addr()+"/m/a.txt", strings.NewReader("hello metrics"))
	if resp, err = http.DefaultClient.Do(req); err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("filer PUT: %v %v", resp, err)
	}
	resp.Body.Close()
	if resp, err = http.Get("http://" + fs.Addr() + "/m/a.txt"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("filer GET: %v %v", resp, err)
	}
	resp.Body.Close()
	s3c := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(gw.URL()), UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk}, nil
		})})
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("mbucket")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("mbucket"), Key: aws.String("k"), Body: strings.NewReader("data")}); err != nil {
		t.Fatal(err)
	}
	out, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("mbucket"), Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, out.Body)
	out.Body.Close()
	req, _ = http.NewRequest("PROPFIND", dav.URL()+"/", nil)
	req.Header.Set("Depth", "1")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	after := map[string]map[string]*dto.MetricFamily{}
	for _, p := range procs {
		fams := scrape(t, p.url)
		after[p.name] = fams
		if n := kelpFamilies(fams); n < 5 {
			t.Errorf("%s: %d kelp_ families, want at least 5", p.name, n)
		}
		if fams["go_goroutines"] == nil {
			t.Errorf("%s: no go_goroutines", p.name)
		}
		t.Logf("%s: %d kelp_ families", p.name, kelpFamilies(fams))
	}
	moved := func(proc, name string, labels map[string]string) {
		t.Helper()
		b, a := sum(before[proc], name, labels), sum(after[proc], name, labels)
		if a <= b {
			t.Errorf("%s: %s%v did not move: %v -> %v", proc, name, labels, b, a)
		}
	}
	leaderName := fmt.Sprintf("master%d", slices.Index(c.Masters, leader))
	moved(leaderName, "kelp_http_requests_total", map[string]string{"api": "master", "op": "assign", "code": "200"})
	moved(leaderName, "kelp_http_request_duration_seconds", map[string]string{"api": "master", "op": "assign"})
	moved(leaderName, "kelp_http_response_bytes_total", map[string]string{"api": "master", "op": "assign"})
	vol := func(op string) float64 {
		return sum(after["volume0"], "kelp_http_requests_total", map[string]string{"op": op}) +
			sum(after["volume1"], "kelp_http_requests_total", map[string]string{"op": op})
	}
	if vol("write") < 10 || vol("read") < 5 { // 5 writes, replicated 001: 10
		t.Errorf("volume writes %v (want >= 10), reads %v (want >= 5)", vol("write"), vol("read"))
	}
	in := sum(after["volume0"], "kelp_http_request_bytes_total", map[string]string{"op": "write"}) +
		sum(after["volume1"], "kelp_http_request_bytes_total", map[string]string{"op": "write"})
	if in < 10*1000 {
		t.Errorf("volume write bytes in = %v, want >= 10000", in)
	}
	moved("filer", "kelp_http_requests_total", map[string]string{"api": "filer", "op": "PUT"})
	moved("filer", "kelp_http_requests_total", map[string]string{"api": "filer", "op": "GET"})
	moved("filer", "kelp_http_response_bytes_total", map[string]string{"api": "filer", "op": "GET"})
	moved("filer", "kelp_filer_store_duration_seconds", map[string]string{"op": "update"})
	moved("filer", "kelp_filer_event_last_seq", nil)
	moved("s3", "kelp_http_requests_total", map[string]string{"api": "s3", "op": "PutObject", "code": "200"})
	moved("s3", "kelp_http_requests_total", map[string]string{"api": "s3", "op": "GetObject", "code": "200"})
	moved("s3", "kelp_http_requests_total", map[string]string{"api": "s3", "op": "CreateBucket"})
	moved("webdav", "kelp_http_requests_total", map[string]string{"api": "webdav", "op": "PROPFIND"})
	if got := sum(after[leaderName], "kelp_raft_leader", nil); got != 1 {
		t.Errorf("leader's kelp_raft_leader = %v", got)
	}
	leaders := 0.0
	for i := range c.Masters {
		leaders += sum(after[fmt.Sprintf("master%d", i)], "kelp_raft_leader", nil)
	}
	if leaders != 1 {
		t.Errorf("kelp_raft_leader summed over masters = %v, want 1", leaders)
	}
	if got := sum(after[leaderName], "kelp_master_volume_servers", nil); got != 2 {
		t.Errorf("kelp_master_volume_servers = %v, want 2", got)
	}
	if got := sum(after[leaderName], "kelp_master_volumes_under_replicated", nil); got != 0 {
		t.Errorf("kelp_master_volumes_under_replicated = %v, want 0", got)
	}
	if got := sum(after["volume0"], "kelp_volume_server_disk_free_bytes", nil); got <= 0 {
		t.Errorf("volume0 kelp_volume_server_disk_free_bytes = %v", got)
	}

	// Stopping a volume server leaves its volumes with one copy of two.
	c.Volume[1].Stop()
	deadline := time.Now().Add(30 * time.Second)
	for {
		fams := scrape(t, procs[slices.Index(c.Masters, leader)].url)
		if sum(fams, "kelp_master_volumes_under_replicated", nil) > 0 && sum(fams, "kelp_master_replica_deficit", nil) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("kelp_master_volumes_under_replicated stayed 0 with a volume server stopped")
		}
		time.Sleep(100 * time.Millisecond) // polling a condition
	}

	checkDashboard(t, procs)
}

var (
	promMetricRE = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promWords    = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true,
		"group_right": true, "bool": true, "and": true, "or": true, "unless": true, "offset": true}
)

// metricNames returns the metric names in a PromQL expression: the
// identifiers that are neither functions (followed by '('), label names
// (inside {} or after by/without), nor keywords.
func metricNames(expr string) []string {
	// Drop label matchers, grouping clauses and strings.
	expr = regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(expr, "")
	expr = regexp.MustCompile(`"[^"]*"`).ReplaceAllString(expr, "")
	expr = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`).ReplaceAllString(expr, "")
	expr = regexp.MustCompile(`\[[^\]]*\]`).ReplaceAllString(expr, "")
	var out []string
	for _, loc := range promMetricRE.FindAllStringIndex(expr, -1) {
		w := expr[loc[0]:loc[1]]
		rest := strings.TrimLeft(expr[loc[1]:], " ")
		if promWords[w] || strings.HasPrefix(rest, "(") {
			continue
		}
		if loc[0] > 0 && (expr[loc[0]-1] >= '0' && expr[loc[0]-1] <= '9' || expr[loc[0]-1] == '.') {
			continue // a unit suffix such as 5m, 1e9
		}
		out = append(out, w)
	}
	return out
}

// checkDashboard checks that every PromQL expression of the Grafana
// dashboard and the alert rules names families that exist: registered on
// one of the processes (kelp_), or exported by every Go process (go_,
// process_), or Prometheus' own (up). Histogram suffixes count as their
// family.
func checkDashboard(t *testing.T, procs []process) {
	t.Helper()
	known := map[string]bool{"up": true}
	for _, p := range procs {
		for _, n := range p.reg.KelpNames() {
			known[n] = true
		}
		fams, err := p.reg.Prometheus().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			known[f.GetName()] = true
		}
	}
	exists := func(name string) bool {
		if known[name] {
			return true
		}
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suf); ok && known[b] {
				return true
			}
		}
		return false
	}
	b, err := os.ReadFile("../../deploy/grafana/kelp.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("kelp.json: %v", err)
	}
	exprs := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs++
			names := metricNames(tg.Expr)
			if len(names) == 0 {
				t.Errorf("panel %q: no metric in %q", p.Title, tg.Expr)
			}
			for _, n := range names {
				if !exists(n) {
					t.Errorf("panel %q: %s is no registered metric (in %q)", p.Title, n, tg.Expr)
				}
			}
		}
	}
	if exprs < 10 {
		t.Errorf("the dashboard has %d expressions", exprs)
	}
	rules, err := os.ReadFile("../../deploy/prometheus/rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(rules), "\n") {
		expr, ok := strings.CutPrefix(strings.TrimSpace(line), "expr:")
		if !ok {
			continue
		}
		for _, n := range metricNames(strings.TrimSpace(expr)) {
			if !exists(n) {
				t.Errorf("rules.yml: %s is no registered metric (in %q)", n, expr)
			}
		}
	}
}

func TestPromQLMetricNames(t *testing.T) {
	got := metricNames(`sum by (api, op) (rate(kelp_http_requests_total{code=~"5.."}[5m])) / on(instance) group_left max(up) > 0.5 and histogram_quantile(0.99, sum by (le) (rate(kelp_http_request_duration_seconds_bucket[5m])))`)
	want := []string{"kelp_http_requests_total", "up", "kelp_http_request_duration_seconds_bucket"}
	if !slices.Equal(got, want) {
		t.Fatalf("metricNames = %v, want %v", got, want)
	}
}

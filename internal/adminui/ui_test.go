package adminui

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/testutil"
)

func newTestUI(t testing.TB, src *fakeSource) (*UI, *httptest.Server) {
	t.Helper()
	ui, err := New(Config{User: "admin", Password: "s3cret", Source: src,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return src.now }})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(ui)
	t.Cleanup(ts.Close)
	return ui, ts
}

// noRedirect is a client that shows redirects instead of following them.
func noRedirect(jar http.CookieJar) *http.Client {
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func do(t *testing.T, c *http.Client, method, u string, body url.Values, setup func(*http.Request)) (int, string, http.Header) {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = strings.NewReader(body.Encode())
	}
	req, err := http.NewRequest(method, u, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if setup != nil {
		setup(req)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func basic(user, pw string) func(*http.Request) {
	return func(r *http.Request) { r.SetBasicAuth(user, pw) }
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfRe.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", page)
	}
	return m[1]
}

func TestRefusedWithoutCredentials(t *testing.T) {
	src := newFakeSource(4, 10)
	_, ts := newTestUI(t, src)
	c := noRedirect(nil)
	for _, p := range []string{"/", "/masters", "/topology", "/topology.svg", "/volumes", "/maintenance", "/nope"} {
		if code, _, h := do(t, c, "GET", ts.URL+p, nil, nil); code != 401 || h.Get("WWW-Authenticate") == "" {
			t.Errorf("GET %s without credentials: %d (WWW-Authenticate %q), want 401 with a challenge", p, code, h.Get("WWW-Authenticate"))
		}
		if code, _, _ := do(t, c, "GET", ts.URL+p, nil, basic("admin", "wrong")); code != 401 {
			t.Errorf("GET %s with a wrong password: %d, want 401", p, code)
		}
		if code, _, _ := do(t, c, "GET", ts.URL+p, nil, basic("root", "s3cret")); code != 401 {
			t.Errorf("GET %s with a wrong user: %d, want 401", p, code)
		}
	}
	// A browser's first visit is a basic-auth challenge whose page is the
	// login form (http://user:pw@host/ URLs answer it); once it has seen
	// the form, it is sent to the form.
	html := func(r *http.Request) { r.Header.Set("Accept", "text/html") }
	code, page, h := do(t, c, "GET", ts.URL+"/volumes?sort=size", nil, html)
	if code != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Basic ") ||
		!strings.Contains(page, `name="user"`) || !strings.Contains(page, `name="next" value="/volumes?sort=size"`) {
		t.Errorf("a browser's first visit without credentials: %d (WWW-Authenticate %q), want 401, a challenge and the login form:\n%s", code, h.Get("WWW-Authenticate"), page)
	}
	seen := false
	for _, ck := range (&http.Response{Header: h}).Cookies() {
		seen = seen || ck.Name == "kelp_admin_form"
	}
	if !seen {
		t.Errorf("the first visit's login form set no kelp_admin_form cookie: %q", h.Values("Set-Cookie"))
	}
	code, _, h = do(t, c, "GET", ts.URL+"/volumes?sort=size", nil, func(r *http.Request) {
		html(r)
		r.AddCookie(&http.Cookie{Name: "kelp_admin_form", Value: "1"})
	})
	if code != http.StatusSeeOther || h.Get("Location") != "/login?next="+url.QueryEscape("/volumes?sort=size") {
		t.Errorf("a browser that saw the form, without credentials: %d to %q, want 303 to the login form", code, h.Get("Location"))
	}
	// The challenge answered with the credentials: the page itself.
	if code, page, _ := do(t, c, "GET", ts.URL+"/", nil, func(r *http.Request) { html(r); basic("admin", "s3cret")(r) }); code != 200 || !strings.Contains(page, `id="masters"`) {
		t.Errorf("a browser answering the challenge: %d\n%s", code, page)
	}
	// A POST without credentials or with a wrong password changes nothing.
	form := url.Values{"op": {"balance"}}
	if code, _, _ := do(t, c, "POST", ts.URL+"/maintenance", form, nil); code != 401 {
		t.Errorf("POST without credentials: %d, want 401", code)
	}
	if code, _, _ := do(t, c, "POST", ts.URL+"/maintenance", form, basic("admin", "nope")); code != 401 {
		t.Errorf("POST with a wrong password: %d, want 401", code)
	}
	if len(src.scripts()) != 0 || len(uiJobs(t, c, ts)) != 0 {
		t.Errorf("refused requests ran %v", src.scripts())
	}
}

func uiJobs(t *testing.T, c *http.Client, ts *httptest.Server) []string {
	t.Helper()
	_, page, _ := do(t, c, "GET", ts.URL+"/maintenance", nil, basic("admin", "s3cret"))
	return regexp.MustCompile(`/maintenance/jobs/(\d+)"`).FindAllString(page, -1)
}

func TestBasicAuthAndCSRF(t *testing.T) {
	src := newFakeSource(4, 10)
	_, ts := newTestUI(t, src)
	c := noRedirect(nil)
	code, page, _ := do(t, c, "GET", ts.URL+"/", nil, basic("admin", "s3cret"))
	if code != 200 {
		t.Fatalf("GET / with basic auth: %d %s", code, page)
	}
	for _, want := range []string{"127.0.0.1:9333", "127.0.0.1:9334", "127.0.0.1:9335", "leader", "follower", "unreachable", "down"} {
		if !strings.Contains(page, want) {
			t.Errorf("the masters page lacks %q", want)
		}
	}
	tok := csrfOf(t, page)
	// No token, a wrong token (its first digit changed: "00"+tok[2:] was
	// the token itself once in 256 runs): 403 and nothing runs.
	wrong := "0" + tok[1:]
	if tok[0] == '0' {
		wrong = "1" + tok[1:]
	}
	for _, f := range []url.Values{{"op": {"balance"}}, {"op": {"balance"}, "csrf": {wrong}}} {
		if code, body, _ := do(t, c, "POST", ts.URL+"/maintenance", f, basic("admin", "s3cret")); code != 403 {
			t.Errorf("POST %v: %d %s, want 403", f, code, body)
		}
	}
	if s := src.scripts(); len(s) != 0 {
		t.Fatalf("a POST without its CSRF token ran %v", s)
	}
	// The token from the page, or as a header, works.
	code, _, h := do(t, c, "POST", ts.URL+"/maintenance", url.Values{"op": {"balance"}, "csrf": {tok}}, basic("admin", "s3cret"))
	if code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/maintenance/jobs/") {
		t.Fatalf("POST with the token: %d %q", code, h.Get("Location"))
	}
	code, _, _ = do(t, c, "POST", ts.URL+"/maintenance", url.Values{"op": {"fix-replication"}, "collection": {"photos"}},
		func(r *http.Request) { r.SetBasicAuth("admin", "s3cret"); r.Header.Set(csrfHeader, tok) })
	if code != http.StatusSeeOther {
		t.Fatalf("POST with the token as a header: %d", code)
	}
	// Bad input is a 400, not a job.
	if code, _, _ := do(t, c, "POST", ts.URL+"/maintenance", url.Values{"op": {"fix-replication"}, "collection": {"a; volume.delete"}, "csrf": {tok}}, basic("admin", "s3cret")); code != 400 {
		t.Errorf("a collection with a ';': %d, want 400", code)
	}
	if code, _, _ := do(t, c, "POST", ts.URL+"/maintenance", url.Values{"op": {"format-disks"}, "csrf": {tok}}, basic("admin", "s3cret")); code != 400 {
		t.Errorf("an unknown operation: %d, want 400", code)
	}
}

func TestLoginSessionLogout(t *testing.T) {
	src := newFakeSource(4, 10)
	_, ts := newTestUI(t, src)
	jar, _ := cookiejar.New(nil)
	c := noRedirect(jar)
	code, page, _ := do(t, c, "GET", ts.URL+"/login?next=/volumes", nil, nil)
	if code != 200 {
		t.Fatalf("GET /login: %d", code)
	}
	tok := csrfOf(t, page)
	// Without the token: 403; a wrong password: 401; neither logs in.
	if code, _, _ := do(t, c, "POST", ts.URL+"/login", url.Values{"user": {"admin"}, "password": {"s3cret"}}, nil); code != 403 {
		t.Errorf("login without the CSRF token: %d, want 403", code)
	}
	code, page, _ = do(t, c, "POST", ts.URL+"/login", url.Values{"user": {"admin"}, "password": {"guess"}, "csrf": {tok}}, nil)
	if code != 401 || !strings.Contains(page, "Wrong user or password") {
		t.Errorf("a wrong password: %d, want 401 and the form again", code)
	}
	if code, _, _ := do(t, c, "GET", ts.URL+"/", nil, nil); code != 401 {
		t.Fatalf("after failed logins GET / answered %d", code)
	}
	tok = csrfOf(t, page)
	code, _, h := do(t, c, "POST", ts.URL+"/login", url.Values{"user": {"admin"}, "password": {"s3cret"}, "csrf": {tok}, "next": {"/volumes"}}, nil)
	if code != http.StatusSeeOther || h.Get("Location") != "/volumes" {
		t.Fatalf("login: %d to %q", code, h.Get("Location"))
	}
	if sc := h.Get("Set-Cookie"); !strings.Contains(sc, "HttpOnly") || !strings.Contains(sc, "SameSite=Strict") {
		t.Errorf("session cookie %q is not HttpOnly and SameSite=Strict", sc)
	}
	code, page, _ = do(t, c, "GET", ts.URL+"/volumes", nil, nil)
	if code != 200 {
		t.Fatalf("GET /volumes in the session: %d", code)
	}
	stok := csrfOf(t, page)
	// The session's POSTs need the session's token.
	if code, _, _ := do(t, c, "POST", ts.URL+"/logout", nil, nil); code != 403 {
		t.Errorf("logout without the token: %d, want 403", code)
	}
	if code, _, _ := do(t, c, "GET", ts.URL+"/", nil, nil); code != 200 {
		t.Fatalf("a refused logout ended the session (%d)", code)
	}
	if code, _, _ := do(t, c, "POST", ts.URL+"/logout", url.Values{"csrf": {stok}}, nil); code != http.StatusSeeOther {
		t.Errorf("logout: %d", code)
	}
	if code, _, _ := do(t, c, "GET", ts.URL+"/", nil, nil); code != 401 {
		t.Errorf("after logout GET / answered %d, want 401", code)
	}
	// An open redirect is refused.
	if got := safeNext("//evil.example/x"); got != "/" {
		t.Errorf("safeNext(//evil.example/x) = %q", got)
	}
	if got := safeNext("https://evil.example/"); got != "/" {
		t.Errorf("safeNext(https://evil.example/) = %q", got)
	}
}

func TestVolumesFilterAndSort(t *testing.T) {
	src := newFakeSource(20, 300)
	_, ts := newTestUI(t, src)
	c := noRedirect(nil)
	get := func(q string) string {
		t.Helper()
		code, page, _ := do(t, c, "GET", ts.URL+"/volumes?"+q, nil, basic("admin", "s3cret"))
		if code != 200 {
			t.Fatalf("GET /volumes?%s: %d %s", q, code, page)
		}
		return page
	}
	rowRe := regexp.MustCompile(`<tr class="[^"]*">\s*<td>(\d+)</td><td>([^<]*)</td>`)
	rows := func(page string) [][]string { return rowRe.FindAllStringSubmatch(page, -1) }
	all := get("")
	if !strings.Contains(all, "300 of 300 volume(s)") || len(rows(all)) != volumesPerPage {
		t.Fatalf("unfiltered: want 300 volumes, %d rows on page 1", len(rows(all)))
	}
	photos := rows(get("collection=photos"))
	for _, r := range photos {
		if r[2] != "photos" {
			t.Errorf("collection=photos shows volume %s of %q", r[1], r[2])
		}
	}
	bySize := rows(get("sort=id&desc=1"))
	if bySize[0][1] != "300" {
		t.Errorf("sort=id&desc=1 starts with %s", bySize[0][1])
	}
	unmet := get("unmet=1")
	if !strings.Contains(unmet, "4 of 300 volume(s)") { // volumes 1, 98, 195, 292 have one copy
		t.Errorf("unmet=1 does not show the 4 volumes with one copy of two")
	}
	garbage := rows(get("garbage=40&sort=garbage"))
	if len(garbage) != 30 {
		t.Errorf("garbage=40 shows %d volumes, want 30", len(garbage))
	}
	for _, q := range []string{"sort=nope", "page=0", "garbage=x", "readonly=maybe"} {
		if code, _, _ := do(t, c, "GET", ts.URL+"/volumes?"+q, nil, basic("admin", "s3cret")); code != 400 {
			t.Errorf("GET /volumes?%s: %d, want 400", q, code)
		}
	}
}

func TestTopologyShowsStaleServer(t *testing.T) {
	src := newFakeSource(12, 40)
	_, ts := newTestUI(t, src)
	c := noRedirect(nil)
	code, page, _ := do(t, c, "GET", ts.URL+"/topology", nil, basic("admin", "s3cret"))
	if code != 200 {
		t.Fatalf("GET /topology: %d", code)
	}
	for _, want := range []string{"Data center dc0", "Rack rack0", "10.0.0.3:8080 <strong class=\"bad\">NO HEARTBEAT", "<meter", "1 server(s) not heartbeating"} {
		if !strings.Contains(page, want) {
			t.Errorf("the topology page lacks %q", want)
		}
	}
	code, svg, h := do(t, c, "GET", ts.URL+"/topology.svg", nil, basic("admin", "s3cret"))
	if code != 200 || h.Get("Content-Type") != "image/svg+xml" || !strings.HasPrefix(svg, "<svg") {
		t.Fatalf("GET /topology.svg: %d %s", code, h.Get("Content-Type"))
	}
	if n := strings.Count(svg, `class="server`); n != 12 {
		t.Errorf("the picture has %d servers, want 12", n)
	}
	if n := strings.Count(svg, `class="server stale"`); n != 1 {
		t.Errorf("the picture has %d stale servers, want 1", n)
	}
}

func TestMaintenancePlanThenApply(t *testing.T) {
	src := newFakeSource(4, 10)
	_, ts := newTestUI(t, src)
	c := noRedirect(nil)
	_, page, _ := do(t, c, "GET", ts.URL+"/maintenance", nil, basic("admin", "s3cret"))
	tok := csrfOf(t, page)
	_, _, h := do(t, c, "POST", ts.URL+"/maintenance", url.Values{"op": {"balance"}, "csrf": {tok}}, basic("admin", "s3cret"))
	jobURL := ts.URL + h.Get("Location")
	page = waitJob(t, c, jobURL)
	if !strings.Contains(page, "plan: move volume 1") || !strings.Contains(page, `id="apply"`) {
		t.Fatalf("the plan page lacks the plan or the apply button:\n%s", page)
	}
	_, _, h = do(t, c, "POST", ts.URL+"/maintenance", url.Values{"op": {"balance"}, "apply": {"1"}, "csrf": {tok}}, basic("admin", "s3cret"))
	page = waitJob(t, c, ts.URL+h.Get("Location"))
	if strings.Contains(page, `id="apply"`) {
		t.Errorf("an applied job offers to apply again")
	}
	want := []string{"lock; volume.balance; unlock", "lock; volume.balance -force; unlock"}
	if got := src.scripts(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("scripts %q, want %q", got, want)
	}
	// Vacuum's plan comes from the topology; nothing runs until applied.
	_, _, h = do(t, c, "POST", ts.URL+"/maintenance", url.Values{"op": {"vacuum"}, "garbageThreshold": {"0.4"}, "csrf": {tok}}, basic("admin", "s3cret"))
	page = waitJob(t, c, ts.URL+h.Get("Location"))
	if !strings.Contains(page, "1 volume(s) at or above 40% garbage") {
		t.Errorf("vacuum plan:\n%s", page)
	}
	if n := len(src.scripts()); n != 2 {
		t.Errorf("a vacuum plan ran a shell script")
	}
}

// waitJob polls a job page until the job is done (as the page itself
// does, by refreshing).
func waitJob(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	var page string
	done := testutil.Eventually(10*time.Second, func() bool {
		var code int
		code, page, _ = do(t, c, "GET", u, nil, basic("admin", "s3cret"))
		if code != 200 {
			t.Fatalf("GET %s: %d", u, code)
		}
		return !strings.Contains(page, "running…")
	})
	if !done {
		t.Fatalf("job %s never finished", u)
	}
	return page
}

func TestFilerPathsRefused(t *testing.T) {
	src := newFakeSource(2, 2)
	ui, err := New(Config{User: "admin", Password: "s3cret", Source: src, FilerRoot: "/buckets",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Filer: func() string { return "127.0.0.1:1" }})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(ui)
	defer ts.Close()
	c := noRedirect(nil)
	for _, p := range []string{"/etc/", "/buckets/../etc/", "/bucketsx/", "relative/", "/buckets/./a"} {
		if code, _, _ := do(t, c, "GET", ts.URL+"/files?path="+url.QueryEscape(p), nil, basic("admin", "s3cret")); code != 400 {
			t.Errorf("GET /files?path=%s: %d, want 400", p, code)
		}
		if code, _, _ := do(t, c, "GET", ts.URL+"/files/download?path="+url.QueryEscape(p+"f"), nil, basic("admin", "s3cret")); code != 400 {
			t.Errorf("download %sf: %d, want 400", p, code)
		}
	}
	_, page, _ := do(t, c, "GET", ts.URL+"/maintenance", nil, basic("admin", "s3cret"))
	tok := csrfOf(t, page)
	for _, f := range []url.Values{
		{"path": {"/etc/passwd"}}, {"path": {"/buckets"}}, {"path": {"/buckets/../x"}},
	} {
		f.Set("csrf", tok)
		if code, _, _ := do(t, c, "POST", ts.URL+"/files/delete", f, basic("admin", "s3cret")); code != 400 {
			t.Errorf("delete %v: %d, want 400", f.Get("path"), code)
		}
	}
	if code, _, _ := do(t, c, "POST", ts.URL+"/files/rename", url.Values{"csrf": {tok}, "path": {"/buckets/a"}, "name": {"../b"}}, basic("admin", "s3cret")); code != 400 {
		t.Errorf("rename to ../b: %d, want 400", code)
	}
	if code, _, _ := do(t, c, "POST", ts.URL+"/buckets/create", url.Values{"csrf": {tok}, "name": {"Bad_Name"}}, basic("admin", "s3cret")); code != 400 {
		t.Errorf("create bucket Bad_Name: %d, want 400", code)
	}
	if code, _, _ := do(t, c, "POST", ts.URL+"/buckets/delete", url.Values{"csrf": {tok}, "name": {"abc"}, "confirm": {"abd"}}, basic("admin", "s3cret")); code != 400 {
		t.Errorf("delete bucket without its name as confirmation: %d, want 400", code)
	}
	// No filer reachable: a clear 502, not a 500.
	if code, _, _ := do(t, c, "GET", ts.URL+"/files?path=/buckets/", nil, basic("admin", "s3cret")); code != http.StatusBadGateway {
		t.Errorf("listing with the filer down: %d, want 502", code)
	}
}

func TestSmallestMatchesSort(t *testing.T) {
	rows := volumeRows(newFakeSource(20, 3000).TopologyStatus())
	for _, vq := range []volumeQuery{{Sort: "size"}, {Sort: "garbage", Desc: true}, {Sort: "collection"}, {Sort: "id", Desc: true}} {
		var all []*volumeRow
		for i := range rows {
			all = append(all, &rows[i])
		}
		want := slices.Clone(all)
		slices.SortFunc(want, vq.compare)
		for _, k := range []int{1, 100, 700} {
			got := smallest(slices.Clone(all), k, vq.compare)
			for i := range got {
				if got[i].ID != want[i].ID {
					t.Fatalf("sort %s desc %v k %d: row %d is volume %d, want %d", vq.Sort, vq.Desc, k, i, got[i].ID, want[i].ID)
				}
			}
		}
	}
}

func TestCollectionsListAndDelete(t *testing.T) {
	src := newFakeSource(4, 9)
	_, ts := newTestUI(t, src)
	c := noRedirect(nil)
	code, page, _ := do(t, c, "GET", ts.URL+"/collections", nil, basic("admin", "s3cret"))
	if code != 200 {
		t.Fatalf("GET /collections: %d %s", code, page)
	}
	for _, name := range []string{`data-collection="photos"`, `data-collection="logs"`, `data-collection=""`} {
		i := strings.Index(page, name)
		if i < 0 {
			t.Fatalf("no row %s:\n%s", name, page)
		}
		if row := page[i:]; !strings.Contains(row[:strings.Index(row, "</tr>")], `<td class="num">3</td>`) {
			t.Errorf("row %s does not show 3 volumes: %s", name, row[:strings.Index(row, "</tr>")])
		}
	}
	tok := csrfOf(t, page)
	del := url.Values{"op": {"collection-delete"}, "collection": {"photos"}, "confirm": {"photos"}}
	// Refused: no credentials, no token, no or a wrong confirmation, no collection.
	if code, _, _ := do(t, c, "POST", ts.URL+"/maintenance", del, nil); code != 401 {
		t.Errorf("without credentials: %d", code)
	}
	if code, _, _ := do(t, c, "POST", ts.URL+"/maintenance", del, basic("admin", "s3cret")); code != 403 {
		t.Errorf("without a CSRF token: %d", code)
	}
	for _, f := range []url.Values{
		{"op": {"collection-delete"}, "collection": {"photos"}, "csrf": {tok}},
		{"op": {"collection-delete"}, "collection": {"photos"}, "confirm": {"logs"}, "csrf": {tok}},
		{"op": {"collection-delete"}, "confirm": {""}, "csrf": {tok}},
		{"op": {"collection-delete"}, "collection": {"a b"}, "confirm": {"a b"}, "csrf": {tok}},
	} {
		if code, _, _ := do(t, c, "POST", ts.URL+"/maintenance", f, basic("admin", "s3cret")); code != 400 {
			t.Errorf("POST %v: %d, want 400", f, code)
		}
	}
	if s := src.scripts(); len(s) != 0 {
		t.Fatalf("refused requests ran %q", s)
	}
	// The plan, then its apply button.
	del.Set("csrf", tok)
	_, _, h := do(t, c, "POST", ts.URL+"/maintenance", del, basic("admin", "s3cret"))
	page = waitJob(t, c, ts.URL+h.Get("Location"))
	if !strings.Contains(page, `id="apply"`) || !strings.Contains(page, `name="confirm" value="photos"`) {
		t.Fatalf("the plan page lacks its apply button with the confirmation:\n%s", page)
	}
	form := url.Values{"csrf": {tok}}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="(\w+)" value="([^"]*)">`).FindAllStringSubmatch(page[strings.Index(page, `id="apply"`):], -1) {
		if m[1] != "csrf" {
			form.Set(m[1], m[2])
		}
	}
	_, _, h = do(t, c, "POST", ts.URL+"/maintenance", form, basic("admin", "s3cret"))
	waitJob(t, c, ts.URL+h.Get("Location"))
	want := []string{"lock; collection.delete -collection photos; unlock", "lock; collection.delete -collection photos -force; unlock"}
	if got := src.scripts(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("scripts %q, want %q", got, want)
	}
	// Not offered on the maintenance page itself.
	if _, page, _ := do(t, c, "GET", ts.URL+"/maintenance", nil, basic("admin", "s3cret")); strings.Contains(page, `id="op-collection-delete"`) {
		t.Errorf("the maintenance page offers collection deletion without its confirmation")
	}
}

package adminui_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/chromedp/chromedp"

	"github.com/kelpfs/kelp/internal/adminui"
	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/master"
	"github.com/kelpfs/kelp/internal/s3"
	"github.com/kelpfs/kelp/internal/shell"
	"github.com/kelpfs/kelp/internal/testcluster"
	"github.com/kelpfs/kelp/internal/testutil"
	"github.com/kelpfs/kelp/internal/topology"
)

// uiCluster is a one-master cluster with the UI mounted on the master, a
// filer and an S3 gateway that reads the shared identities (every 20 ms).
type uiCluster struct {
	c    *testcluster.Cluster
	fs   *filerserver.Server
	gw   *s3.Server
	base string
}

func startUICluster(t *testing.T) *uiCluster {
	t.Helper()
	var filerAddr, filerGRPC atomic.Value
	filerAddr.Store("")
	filerGRPC.Store("")
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}, RunShell: shell.RunScriptOn, AdminUI: func(m *master.Server) http.Handler {
		ui, err := adminui.New(adminui.Config{User: testUser, Password: testPassword, Source: m,
			Logger: slog.New(slog.DiscardHandler), Filer: func() string { return filerAddr.Load().(string) },
			FilerGRPC: func() string { return filerGRPC.Load().(string) }})
		if err != nil {
			panic(err)
		}
		return ui
	}})
	fs, err := filerserver.New(filerserver.Config{IP: "127.0.0.1", Masters: c.MasterAddrs(), Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := s3.New(s3.Config{IP: "127.0.0.1", Namespace: fs.Filer(), BucketRoot: "/buckets", Logger: slog.New(slog.DiscardHandler),
		SharedIdentities: s3.SharedIdentitiesPath, ReloadInterval: 20 * time.Millisecond,
		Identities: []s3.Identity{{Name: "admin", Credentials: []s3.Credential{{AccessKey: "AKUI", SecretKey: "secret-ui"}}, Actions: []string{"Admin"}}}})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- fs.Run(rctx) }()
	go func() { done <- gw.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done; <-done })
	filerAddr.Store(fs.Addr())
	filerGRPC.Store(fs.GRPCAddr())
	return &uiCluster{c: c, fs: fs, gw: gw, base: "http://" + c.Master.Addr}
}

var plain = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// call sends a request to the UI with basic auth (auth false: none).
func (u *uiCluster) call(t *testing.T, method, p string, form url.Values, auth bool) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, u.base+p, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if auth {
		req.SetBasicAuth(testUser, testPassword)
	}
	resp, err := plain.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var tokenRe = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func (u *uiCluster) token(t *testing.T) string {
	t.Helper()
	_, page := u.call(t, "GET", "/buckets", nil, true)
	m := tokenRe.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in /buckets:\n%s", page)
	}
	return m[1]
}

func s3Client(gw *s3.Server, ak, sk string) *s3sdk.Client {
	return s3sdk.New(s3sdk.Options{BaseEndpoint: aws.String(gw.URL()), Region: "us-east-1", UsePathStyle: true, RetryMaxAttempts: 1,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk}, nil
		})})
}

func s3Code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// eventually waits until cond holds (the gateway re-reads the shared
// identities every 20 ms), at most 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, 10*time.Second, cond, "%s", what)
}

var (
	akRe = regexp.MustCompile(`id="access-key">([A-Z0-9]+)<`)
	skRe = regexp.MustCompile(`id="secret-key">([A-Za-z0-9_-]+)<`)
)

func TestS3KeysCreateUseRevoke(t *testing.T) {
	u := startUICluster(t)
	tok := u.token(t)
	ctx := context.Background()

	// Refused requests change nothing: no credentials, no token.
	form := url.Values{"name": {"app"}, "action": {"Admin"}}
	if code, _ := u.call(t, "POST", "/s3keys/create", form, false); code != 401 {
		t.Errorf("create without credentials: %d, want 401", code)
	}
	if code, _ := u.call(t, "POST", "/s3keys/create", form, true); code != 403 {
		t.Errorf("create without a CSRF token: %d, want 403", code)
	}
	if code, page := u.call(t, "GET", "/s3keys", nil, true); code != 200 || !strings.Contains(page, "no key") {
		t.Fatalf("after refused creations: %d\n%s", code, page)
	}
	if code, _ := u.call(t, "POST", "/s3keys/create", url.Values{"name": {"a/b"}, "action": {"Admin"}, "csrf": {tok}}, true); code != 400 {
		t.Errorf("a bad identity name: %d, want 400", code)
	}
	if code, _ := u.call(t, "POST", "/s3keys/create", url.Values{"name": {"app"}, "action": {"Root"}, "csrf": {tok}}, true); code != 400 {
		t.Errorf("an unknown action: %d, want 400", code)
	}

	// Create: the secret is on this page only.
	form.Set("csrf", tok)
	code, page := u.call(t, "POST", "/s3keys/create", form, true)
	ak, sk := akRe.FindStringSubmatch(page), skRe.FindStringSubmatch(page)
	if code != 200 || ak == nil || sk == nil {
		t.Fatalf("create a key: %d\n%s", code, page)
	}
	_, list := u.call(t, "GET", "/s3keys", nil, true)
	if !strings.Contains(list, ak[1]) || strings.Contains(list, sk[1]) {
		t.Fatalf("the keys page should list %s and never its secret:\n%s", ak[1], list)
	}
	// The running gateway takes the key.
	cl := s3Client(u.gw, ak[1], sk[1])
	eventually(t, "the new key works", func() bool {
		_, err := cl.CreateBucket(ctx, &s3sdk.CreateBucketInput{Bucket: aws.String("made-by-key")})
		return err == nil
	})
	if _, err := cl.PutObject(ctx, &s3sdk.PutObjectInput{Bucket: aws.String("made-by-key"), Key: aws.String("o"), Body: strings.NewReader("x")}); err != nil {
		t.Fatalf("PutObject with the new key: %v", err)
	}
	// The browser does not reach the file holding the secrets.
	if code, _ := u.call(t, "GET", "/files/download?path="+url.QueryEscape(s3.SharedIdentitiesPath), nil, true); code != 400 {
		t.Errorf("download of the shared identity file: %d, want 400", code)
	}
	if code, page := u.call(t, "GET", "/files?path=/", nil, true); code != 200 || strings.Contains(page, ".kelp") {
		t.Errorf("the root listing (%d) shows the system directory:\n%s", code, page)
	}

	// Revoke: refused without the token or the confirmation; then the key
	// stops working.
	rv := url.Values{"accessKey": {ak[1]}, "confirm": {"yes"}}
	if code, _ := u.call(t, "POST", "/s3keys/revoke", rv, true); code != 403 {
		t.Errorf("revoke without a CSRF token: %d, want 403", code)
	}
	if code, _ := u.call(t, "POST", "/s3keys/revoke", url.Values{"accessKey": {ak[1]}, "csrf": {tok}}, true); code != 400 {
		t.Errorf("revoke without the confirmation: %d, want 400", code)
	}
	if _, err := cl.ListBuckets(ctx, &s3sdk.ListBucketsInput{}); err != nil {
		t.Fatalf("refused revocations revoked the key: %v", err)
	}
	rv.Set("csrf", tok)
	if code, page := u.call(t, "POST", "/s3keys/revoke", rv, true); code != http.StatusSeeOther {
		t.Fatalf("revoke: %d\n%s", code, page)
	}
	var last error
	eventually(t, "the revoked key is refused", func() bool {
		_, last = cl.ListBuckets(ctx, &s3sdk.ListBucketsInput{})
		return s3Code(last) == "InvalidAccessKeyId"
	})
	if _, page := u.call(t, "GET", "/s3keys", nil, true); strings.Contains(page, ak[1]) {
		t.Errorf("the revoked key is still listed")
	}
	if code, _ := u.call(t, "POST", "/s3keys/revoke", rv, true); code != 404 {
		t.Errorf("revoke an unknown key: %d, want 404", code)
	}
	// The static identity is untouched.
	if _, err := s3Client(u.gw, "AKUI", "secret-ui").ListBuckets(ctx, &s3sdk.ListBucketsInput{}); err != nil {
		t.Fatalf("the gateway's own key: %v", err)
	}
}

// bucketRow is the buckets page's row of bucket b.
func (u *uiCluster) bucketRow(t *testing.T, b string) string {
	t.Helper()
	code, page := u.call(t, "GET", "/buckets", nil, true)
	if code != 200 {
		t.Fatalf("GET /buckets: %d\n%s", code, page)
	}
	if strings.Contains(page, "unavailable:") {
		t.Fatalf("the buckets page lacks its details:\n%s", page)
	}
	i := strings.Index(page, `data-bucket="`+b+`"`)
	if i < 0 {
		t.Fatalf("no row for bucket %s:\n%s", b, page)
	}
	row := page[i:]
	return row[:strings.Index(row, "</tr>")]
}

func cell(row, class string) string {
	i := strings.Index(row, `class="`+class+`"`)
	if i < 0 {
		return ""
	}
	c := row[i:]
	return c[:strings.Index(c, "</td>")]
}

func TestBucketVersioningQuotaUsage(t *testing.T) {
	u := startUICluster(t)
	tok := u.token(t)
	ctx := context.Background()
	cl := s3Client(u.gw, "AKUI", "secret-ui")
	if _, err := cl.CreateBucket(ctx, &s3sdk.CreateBucketInput{Bucket: aws.String("vqb")}); err != nil {
		t.Fatal(err)
	}
	for i, body := range []string{"12345", "1234567890"} {
		if _, err := cl.PutObject(ctx, &s3sdk.PutObjectInput{Bucket: aws.String("vqb"), Key: aws.String(fmt.Sprintf("d/o%d", i)), Body: strings.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	row := u.bucketRow(t, "vqb")
	if v := cell(row, "versioning"); !strings.Contains(v, "off") {
		t.Errorf("versioning of a new bucket: %s", v)
	}
	if us := cell(row, "usage"); !strings.Contains(us, "15 B") || !strings.Contains(us, "2 objects") {
		t.Errorf("counted usage: %s, want 15 B and 2 objects", us)
	}

	// Versioning: refused requests change nothing; then Enabled, as the
	// gateway sees it; then Suspended.
	en := url.Values{"name": {"vqb"}, "status": {"Enabled"}}
	if code, _ := u.call(t, "POST", "/buckets/versioning", en, false); code != 401 {
		t.Errorf("without credentials: %d", code)
	}
	if code, _ := u.call(t, "POST", "/buckets/versioning", en, true); code != 403 {
		t.Errorf("without a CSRF token: %d", code)
	}
	if code, _ := u.call(t, "POST", "/buckets/versioning", url.Values{"name": {"vqb"}, "status": {"On"}, "csrf": {tok}}, true); code != 400 {
		t.Errorf("a bad status: %d, want 400", code)
	}
	gv, err := cl.GetBucketVersioning(ctx, &s3sdk.GetBucketVersioningInput{Bucket: aws.String("vqb")})
	if err != nil || gv.Status != "" {
		t.Fatalf("refused requests changed versioning: %v %q", err, gv.Status)
	}
	en.Set("csrf", tok)
	if code, page := u.call(t, "POST", "/buckets/versioning", en, true); code != http.StatusSeeOther {
		t.Fatalf("enable versioning: %d %s", code, page)
	}
	gv, err = cl.GetBucketVersioning(ctx, &s3sdk.GetBucketVersioningInput{Bucket: aws.String("vqb")})
	if err != nil || gv.Status != "Enabled" {
		t.Fatalf("the gateway sees versioning %q (%v), want Enabled", gv.Status, err)
	}
	if v := cell(u.bucketRow(t, "vqb"), "versioning"); !strings.Contains(v, "Enabled") || !strings.Contains(v, "Suspend") {
		t.Errorf("versioning cell after enabling: %s", v)
	}
	en.Set("status", "Suspended")
	if code, page := u.call(t, "POST", "/buckets/versioning", en, true); code != http.StatusSeeOther {
		t.Fatalf("suspend versioning: %d %s", code, page)
	}
	if gv, _ = cl.GetBucketVersioning(ctx, &s3sdk.GetBucketVersioningInput{Bucket: aws.String("vqb")}); gv.Status != "Suspended" {
		t.Fatalf("the gateway sees versioning %q, want Suspended", gv.Status)
	}
	if code, _ := u.call(t, "POST", "/buckets/versioning", url.Values{"name": {"nosuchb"}, "status": {"Enabled"}, "csrf": {tok}}, true); code != 404 {
		t.Errorf("versioning of a missing bucket: %d, want 404", code)
	}
	// A bucket with object lock cannot be suspended (objectapi's rule).
	if _, err := cl.CreateBucket(ctx, &s3sdk.CreateBucketInput{Bucket: aws.String("locked"), ObjectLockEnabledForBucket: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	if code, page := u.call(t, "POST", "/buckets/versioning", url.Values{"name": {"locked"}, "status": {"Suspended"}, "csrf": {tok}}, true); code != 409 {
		t.Errorf("suspend a bucket with object lock: %d, want 409\n%s", code, page)
	}
	if gv, _ = cl.GetBucketVersioning(ctx, &s3sdk.GetBucketVersioningInput{Bucket: aws.String("locked")}); gv.Status != "Enabled" {
		t.Errorf("the locked bucket's versioning is %q, want Enabled", gv.Status)
	}

	// Quota: set (usage then comes from the quota record), enforced by the
	// gateway, removed.
	q := url.Values{"name": {"vqb"}, "bytes": {"1K"}, "files": {"3"}}
	if code, _ := u.call(t, "POST", "/buckets/quota", q, true); code != 403 {
		t.Errorf("quota without a CSRF token: %d", code)
	}
	if code, _ := u.call(t, "POST", "/buckets/quota", url.Values{"name": {"vqb"}, "bytes": {"lots"}, "csrf": {tok}}, true); code != 400 {
		t.Errorf("a bad size: %d, want 400", code)
	}
	if cell(u.bucketRow(t, "vqb"), "quota") == "" || !strings.Contains(cell(u.bucketRow(t, "vqb"), "quota"), "none") {
		t.Fatalf("refused requests set a quota: %s", cell(u.bucketRow(t, "vqb"), "quota"))
	}
	q.Set("csrf", tok)
	if code, page := u.call(t, "POST", "/buckets/quota", q, true); code != http.StatusSeeOther {
		t.Fatalf("set a quota: %d %s", code, page)
	}
	row = u.bucketRow(t, "vqb")
	if qc := cell(row, "quota"); !strings.Contains(qc, "1.0 KiB") && !strings.Contains(qc, "1 KiB") || !strings.Contains(qc, "3 objects") {
		t.Errorf("quota cell: %s", qc)
	}
	if us := cell(row, "usage"); !strings.Contains(us, "15 B, 3 entries") {
		t.Errorf("usage from the quota record: %s", us)
	}
	if _, err := cl.PutObject(ctx, &s3sdk.PutObjectInput{Bucket: aws.String("vqb"), Key: aws.String("big"), Body: strings.NewReader(strings.Repeat("x", 2000))}); err == nil {
		t.Errorf("a 2000-byte object went into a bucket with a 1 KiB quota")
	}
	q = url.Values{"name": {"vqb"}, "remove": {"1"}, "csrf": {tok}}
	if code, page := u.call(t, "POST", "/buckets/quota", q, true); code != http.StatusSeeOther {
		t.Fatalf("remove the quota: %d %s", code, page)
	}
	if qc := cell(u.bucketRow(t, "vqb"), "quota"); !strings.Contains(qc, "none") {
		t.Errorf("quota cell after removal: %s", qc)
	}
}

var jobLoc = regexp.MustCompile(`^/maintenance/jobs/\d+$`)

// runJob posts a maintenance form and waits for its job to finish.
func (u *uiCluster) runJob(t *testing.T, form url.Values) string {
	t.Helper()
	req, _ := http.NewRequest("POST", u.base+"/maintenance", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(testUser, testPassword)
	resp, err := plain.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !jobLoc.MatchString(loc) {
		t.Fatalf("start %v: %d to %q", form, resp.StatusCode, loc)
	}
	var page string
	eventually(t, "job "+loc+" finishes", func() bool {
		_, page = u.call(t, "GET", loc, nil, true)
		return !strings.Contains(page, "running…")
	})
	return page
}

func TestCollectionDeleteOnCluster(t *testing.T) {
	u := startUICluster(t)
	tok := u.token(t)
	resp, err := http.Get(u.base + "/dir/assign?collection=scratch")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("assign in collection scratch: %d %s", resp.StatusCode, b)
	}
	has := func() bool {
		_, page := u.call(t, "GET", "/collections", nil, true)
		return strings.Contains(page, `data-collection="scratch"`)
	}
	eventually(t, "the collections page lists scratch", has)

	del := url.Values{"op": {"collection-delete"}, "collection": {"scratch"}, "confirm": {"scratch"}, "csrf": {tok}}
	page := u.runJob(t, del)
	if !strings.Contains(page, "would delete volume") || !strings.Contains(page, `id="apply"`) {
		t.Fatalf("the plan:\n%s", page)
	}
	if !has() {
		t.Fatalf("the dry run deleted the collection")
	}
	del.Set("apply", "1")
	page = u.runJob(t, del)
	if !strings.Contains(page, "deleted volume") || strings.Contains(page, "failed:") {
		t.Fatalf("the deletion:\n%s", page)
	}
	eventually(t, "scratch leaves the collections page", func() bool { return !has() })
}

// TestBrowserS3KeysAndBucketSettings drives the new pages in a real
// browser: create an S3 key (its secret shown once) and use it, enable
// versioning and set a quota on a bucket, look at the collections,
// revoke the key.
func TestBrowserS3KeysAndBucketSettings(t *testing.T) {
	ctx := browser(t)
	dir := artifactDir(t)
	u := startUICluster(t)
	login(t, ctx, u.base)
	if err := chromedp.Do(ctx, chromedp.Navigate(u.base+"/s3keys"), chromedp.WaitVisible(`#create-key`),
		chromedp.SendKeys(`#create-key input[name=name]`, "browser-app"),
		chromedp.Click(`#create-key input[value=Admin]`), chromedp.Submit(`#create-key`),
		chromedp.WaitVisible(`#secret-key`)); err != nil {
		t.Fatalf("create a key: %v", err)
	}
	ak, sk := text(t, ctx, `#access-key`), text(t, ctx, `#secret-key`)
	screenshot(t, ctx, dir, "21-s3key-created")
	cl := s3Client(u.gw, ak, sk)
	bg := context.Background()
	eventually(t, "the key made in the browser works", func() bool {
		_, err := cl.CreateBucket(bg, &s3sdk.CreateBucketInput{Bucket: aws.String("browser-b")})
		return err == nil
	})
	if err := chromedp.Do(ctx, chromedp.Navigate(u.base+"/s3keys"), chromedp.WaitVisible(`#s3keys`)); err != nil {
		t.Fatal(err)
	}
	if page := text(t, ctx, `#s3keys`); !strings.Contains(page, ak) || strings.Contains(page, sk) {
		t.Fatalf("the keys list should show %s and not its secret:\n%s", ak, page)
	}
	screenshot(t, ctx, dir, "22-s3keys")

	row := `tr[data-bucket="browser-b"]`
	if err := chromedp.Do(ctx, chromedp.Navigate(u.base+"/buckets"), chromedp.WaitVisible(row),
		chromedp.Click(row+` form[action="/buckets/versioning"] button`), chromedp.WaitReady(row+` input[name=status][value=Suspended]`),
		chromedp.SendKeys(row+` form.quota-set input[name=bytes]`, "5M"), chromedp.SendKeys(row+` form.quota-set input[name=files]`, "100"),
		chromedp.Submit(row+` form.quota-set`), chromedp.WaitReady(row+` input[name=remove]`)); err != nil {
		t.Fatalf("versioning and quota: %v", err)
	}
	if v := text(t, ctx, row+` td.versioning`); !strings.Contains(v, "Enabled") {
		t.Errorf("versioning cell: %q", v)
	}
	if q := text(t, ctx, row+` td.quota`); !strings.Contains(q, "5.0 MiB") || !strings.Contains(q, "100 objects") {
		t.Errorf("quota cell: %q", q)
	}
	gv, err := cl.GetBucketVersioning(bg, &s3sdk.GetBucketVersioningInput{Bucket: aws.String("browser-b")})
	if err != nil || gv.Status != "Enabled" {
		t.Errorf("the gateway sees versioning %q (%v)", gv.Status, err)
	}
	screenshot(t, ctx, dir, "23-buckets-settings")
	if err := chromedp.Do(ctx, chromedp.Navigate(u.base+"/collections"), chromedp.WaitVisible(`#collections`)); err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, dir, "24-collections")

	krow := `form[action="/s3keys/revoke"]:has(input[value="` + ak + `"])`
	if err := chromedp.Do(ctx, chromedp.Navigate(u.base+"/s3keys"), chromedp.WaitVisible(krow),
		chromedp.Click(krow+` input[name=confirm]`), chromedp.Submit(krow), chromedp.WaitNotPresent(krow)); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	eventually(t, "the key revoked in the browser is refused", func() bool {
		_, err := cl.ListBuckets(bg, &s3sdk.ListBucketsInput{})
		return s3Code(err) == "InvalidAccessKeyId"
	})
}

// TestGeneratedCredentialOnHAMasters starts three masters without a
// password: the first leader generates one and commits its hash, every
// master (a follower too) takes it, a wrong one is refused, and a restart
// of the whole group keeps it.
func TestGeneratedCredentialOnHAMasters(t *testing.T) {
	type generated struct{ user, password, file string }
	made := make(chan generated, 3)
	c := testcluster.Start(t, testcluster.Options{Masters: 3,
		GenerateAdminCredential: func(user, password, file string) { made <- generated{user, password, file} },
		AdminUI: func(m *master.Server) http.Handler {
			ui, err := adminui.New(adminui.Config{Source: m, Logger: slog.New(slog.DiscardHandler),
				Credential: func() (string, string) { c := m.AdminCredential(); return c.User, c.Hash }})
			if err != nil {
				panic(err)
			}
			return ui
		}})
	var g generated
	select {
	case g = <-made:
	case <-time.After(30 * time.Second):
		t.Fatal("no master generated a credential")
	}
	if fi, err := os.Stat(g.file); err != nil || fi.Mode().Perm() != 0o600 || filepath.Base(g.file) != master.AdminCredentialFile {
		t.Fatalf("the password's file %s: %v %v", g.file, fi, err)
	}
	if b, _ := os.ReadFile(g.file); !strings.Contains(string(b), g.password) {
		t.Fatalf("%s does not hold the password: %s", g.file, b)
	}
	status := func(addr, user, password string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		req.SetBasicAuth(user, password)
		resp, err := plain.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	follower := c.Followers()[0]
	// A follower applies the commit a moment after the leader.
	eventually(t, "the follower takes the generated password", func() bool { return status(follower.Addr, g.user, g.password) == 200 })
	for _, m := range c.Masters {
		if got := status(m.Addr, g.user, g.password); got != 200 {
			t.Errorf("%s with the generated password: %d", m.Addr, got)
		}
		if got := status(m.Addr, g.user, g.password+"x"); got != 401 {
			t.Errorf("%s with a wrong password: %d, want 401", m.Addr, got)
		}
		if got := status(m.Addr, "root", g.password); got != 401 {
			t.Errorf("%s with a wrong user: %d, want 401", m.Addr, got)
		}
	}
	// A form login on the follower.
	jar, _ := cookiejar.New(nil)
	br := &http.Client{Jar: jar, CheckRedirect: plain.CheckRedirect}
	resp, err := br.Get("http://" + follower.Addr + "/login")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(string(body))
	if csrf == nil {
		t.Fatalf("no CSRF token on the login form:\n%s", body)
	}
	resp, err = br.PostForm("http://"+follower.Addr+"/login", url.Values{"csrf": {csrf[1]}, "user": {g.user}, "password": {g.password}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("form login on the follower: %d, want 303", resp.StatusCode)
	}

	c.RestartAll()
	eventually(t, "the restarted follower takes the same password", func() bool { return status(c.Followers()[0].Addr, g.user, g.password) == 200 })
	for _, m := range c.Masters {
		if got := status(m.Addr, g.user, g.password); got != 200 {
			t.Errorf("after a restart, %s with the generated password: %d", m.Addr, got)
		}
	}
	select {
	case again := <-made:
		t.Fatalf("a second credential was generated: %+v", again)
	default:
	}
}

// TestMaintenanceProgressFigures runs volume.fix.replication through the
// UI on volumes whose replication was raised from 000 to 001: the job's
// page shows the plan's steps done out of the total, the bytes the copies
// moved, the elapsed time and a progress bar.
func TestMaintenanceProgressFigures(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}, {}}, RunShell: shell.RunScriptOn, AdminUI: uiFactory})
	cl, err := client.New(client.Config{Masters: c.MasterAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	vids := map[uint32]bool{}
	for i := 0; i < 6; i++ {
		id, _, err := cl.PutBytes(ctx, client.AssignRequest{Collection: "prog", Replication: "000"}, bytes.Repeat([]byte{byte(i)}, 64<<10), client.UploadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		vids[id.Volume] = true
	}
	m := c.Master.Master()
	for vid := range vids {
		script := fmt.Sprintf("lock; volume.configure.replication -volumeId %d -replication 001; unlock", vid)
		if err := m.RunShell(ctx, "test", io.Discard, script); err != nil {
			t.Fatal(err)
		}
	}
	u := &uiCluster{c: c, base: "http://" + c.Master.Addr}
	eventually(t, "the master sees the volumes under-replicated", func() bool {
		_, page := u.call(t, "GET", "/volumes?collection=prog&unmet=1", nil, true)
		return strings.Count(page, `<tr class="unmet`) == len(vids)
	})
	form := url.Values{"op": {"fix-replication"}, "collection": {"prog"}, "csrf": {u.token(t)}}
	page := u.runJob(t, form)
	if strings.Contains(page, `id="progress"`) {
		t.Fatalf("a dry run shows progress figures:\n%s", page)
	}
	form.Set("apply", "1")
	page = u.runJob(t, form)
	want := fmt.Sprintf(`<progress max="%d" value="%d">`, len(vids), len(vids))
	if !strings.Contains(page, want) || !strings.Contains(page, fmt.Sprintf(`<span class="done">%d</span> of <span class="total">%d</span> steps`, len(vids), len(vids))) {
		t.Fatalf("the job's page lacks %s and the figures:\n%s", want, page)
	}
	moved := regexp.MustCompile(`<span class="bytes">([^<]+)</span> moved`).FindStringSubmatch(page)
	if moved == nil || moved[1] == "0 B" {
		t.Fatalf("no bytes moved on the page:\n%s", page)
	}
	if !strings.Contains(page, `<span class="elapsed">`) || strings.Contains(page, "failed") {
		t.Fatalf("no elapsed time, or a failure:\n%s", page)
	}
	_, list := u.call(t, "GET", "/maintenance", nil, true)
	if !strings.Contains(list, want) {
		t.Fatalf("the jobs list lacks the progress bar:\n%s", list)
	}
}

// TestCreateCollectionOnFollower creates a collection with its settings
// from a follower's UI: the settings are committed, the master grows its
// volumes, and bad forms change nothing.
func TestCreateCollectionOnFollower(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Masters: 3, Volumes: []testcluster.VolumeSpec{{}}, RunShell: shell.RunScriptOn, AdminUI: uiFactory})
	u := &uiCluster{c: c, base: "http://" + c.Followers()[0].Addr}
	tok := u.token(t)
	post := func(form url.Values) (int, string) {
		return u.call(t, "POST", "/collections/create", form, true)
	}
	for _, bad := range []url.Values{
		{"name": {"a/b"}, "csrf": {tok}},
		{"name": {""}, "csrf": {tok}},
		{"name": {"newc"}, "replication": {"0x1"}, "csrf": {tok}},
		{"name": {"newc"}, "ec": {"4-2"}, "csrf": {tok}},
		{"name": {"newc"}, "writePolicy": {"lax"}, "csrf": {tok}},
	} {
		if code, _ := post(bad); code != http.StatusBadRequest {
			t.Errorf("%v: %d, want 400", bad, code)
		}
	}
	if code, _ := post(url.Values{"name": {"newc"}}); code != http.StatusForbidden {
		t.Errorf("without the CSRF token: %d, want 403", code)
	}
	leader := c.Leader().Master()
	if n := countVolumes(leader.TopologyStatus(), "newc"); n != 0 {
		t.Fatalf("refused forms grew %d volumes", n)
	}
	code, page := post(url.Values{"name": {"newc"}, "replication": {"000"}, "ec": {"4+2"}, "writePolicy": {"degraded"}, "minCopies": {"1"}, "csrf": {tok}})
	if code != http.StatusOK || !strings.Contains(page, `id="created"`) {
		t.Fatalf("create: %d\n%s", code, page)
	}
	if n := countVolumes(leader.TopologyStatus(), "newc"); n == 0 {
		t.Fatal("the master grew no volume for the new collection")
	}
	set := leader.Settings()
	if set.CollectionReplication["newc"] != "000" || set.EcScheme["newc"] != "4+2" || !strings.HasPrefix(set.WritePolicy["newc"], "degraded") {
		t.Fatalf("settings of newc: replication %q, EC %q, write policy %q", set.CollectionReplication["newc"], set.EcScheme["newc"], set.WritePolicy["newc"])
	}
	eventually(t, "the follower lists newc", func() bool {
		_, page := u.call(t, "GET", "/collections", nil, true)
		return strings.Contains(page, `data-collection="newc"`)
	})
}

func countVolumes(st topology.Status, collection string) int {
	n := 0
	for _, l := range st.Layouts {
		if l.Collection == collection {
			n += len(l.Volumes)
		}
	}
	return n
}

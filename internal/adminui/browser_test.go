package adminui_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"github.com/kelpfs/kelp/internal/adminui"
	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/master"
	"github.com/kelpfs/kelp/internal/s3"
	"github.com/kelpfs/kelp/internal/shell"
	"github.com/kelpfs/kelp/internal/testcluster"
	"github.com/kelpfs/kelp/internal/testutil"
)

const (
	testUser     = "admin"
	testPassword = "browser-pw"
)

// artifactDir is where the screenshots go: $KELP_ARTIFACTS/adminui when
// set, else a temporary directory named in the test log.
func artifactDir(t *testing.T) string {
	dir := t.TempDir()
	if a := os.Getenv("KELP_ARTIFACTS"); a != "" {
		dir = filepath.Join(a, "adminui")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// browser starts a headless Chromium, or skips the test without one.
// browserBlockedTestPorts are the ports in testutil.FreePort's range
// (2000-32767) that Chromium refuses to load (ERR_UNSAFE_PORT: NFS, SIP,
// X11, IRC, ...). A test cluster's server may land on one, so the browser
// is told to allow them.
const browserBlockedTestPorts = "2049,3659,4045,4190,5060,5061,6000,6566,6665,6666,6667,6668,6669,6697,10080"

func browser(t *testing.T) context.Context {
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (scripts/test-deps.sh installs it)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1400, 1000), chromedp.Flag("no-proxy-server", true),
		chromedp.Flag("explicitly-allowed-ports", browserBlockedTestPorts))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	// The first call starts the browser, which lives as long as its
	// context: no timeout on that one.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	ctx, cancel3 := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(cancel3)
	return ctx
}

// dismissSignIn makes the browser answer basic-auth challenges as a user
// who closes its sign-in dialog: it shows the 401 page. Headless Chromium
// driven over DevTools would fail the load instead
// (ERR_INVALID_AUTH_CREDENTIALS).
func dismissSignIn(t *testing.T, ctx context.Context) {
	t.Helper()
	paused := chromedp.Events(ctx, fetch.RequestPaused)
	auths := chromedp.Events(ctx, fetch.AuthRequired)
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
		}
	}()
	go func() {
		for ev, err := range auths {
			if err != nil {
				return
			}
			chromedp.Call(ctx, fetch.ContinueWithAuth, fetch.ContinueWithAuthParams{RequestID: ev.RequestID,
				AuthChallengeResponse: &fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseCancelAuth}})
		}
	}()
	yes := true
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{HandleAuthRequests: &yes}); err != nil {
		t.Fatalf("fetch.Enable: %v", err)
	}
}

// text reads the visible text of the first element sel names.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(sel))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// waitShown waits until the element sel of the page on screen has text for
// which ok holds. After a form's submit, an element of the old page is still
// there for a moment: waiting for it to be visible could act on a page that
// is about to go away (an aborted navigation, a node that no longer exists).
func waitShown(t *testing.T, ctx context.Context, sel, what string, ok func(string) bool) {
	t.Helper()
	var last string
	if !testutil.Eventually(20*time.Second, func() bool {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const e = document.querySelector(`+strconv.Quote(sel)+`); return e ? e.innerText : "" })()`))
		last = s
		return err == nil && ok(s)
	}) {
		t.Fatalf("the page never showed %s in %s; it shows:\n%s", what, sel, last)
	}
}

func has(w string) func(string) bool { return func(s string) bool { return strings.Contains(s, w) } }
func hasNot(w string) func(string) bool {
	return func(s string) bool { return !strings.Contains(s, w) }
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func uiFactory(m *master.Server) http.Handler {
	ui, err := adminui.New(adminui.Config{User: testUser, Password: testPassword, Source: m,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	return ui
}

// TestBrowserHACluster drives a real browser through the UI of a
// follower of three masters: log in, see the three masters with their
// roles, kill the leader and see the new one, look at the topology and
// volumes, and run a balance dry run.
func TestBrowserHACluster(t *testing.T) {
	ctx := browser(t)
	dir := artifactDir(t)
	c := testcluster.Start(t, testcluster.Options{Masters: 3, Volumes: []testcluster.VolumeSpec{
		{DataCenter: "dc1", Rack: "r1"}, {DataCenter: "dc1", Rack: "r2"}, {DataCenter: "dc2", Rack: "r1"},
	}, RunShell: shell.RunScriptOn, AdminUI: uiFactory})
	// Some files, so that there are volumes to show (replication 001 on a
	// layout of one server per rack: not met, which the page says).
	cl, err := client.New(client.Config{Masters: c.MasterAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if _, _, err := cl.PutBytes(context.Background(), client.AssignRequest{Collection: "pics"}, []byte(strings.Repeat("x", 1000*(i+1))), client.UploadOptions{}); err != nil {
			t.Fatalf("put: %v", err)
		}
	}
	c.WaitMirrored()
	follower := c.Followers()[0]
	base := "http://" + follower.Addr

	// Credentials in the URL answer the first visit's challenge (another
	// master: the browser keeps them for that origin only).
	other := c.Followers()[1].Addr
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+testUser+":"+testPassword+"@"+other+"/"), chromedp.WaitVisible(`#masters`)); err != nil {
		t.Fatalf("the masters page with credentials in the URL: %v", err)
	}
	if page := text(t, ctx, `#masters`); !strings.Contains(page, other) || !strings.Contains(page, "leader") {
		t.Fatalf("the masters page with credentials in the URL shows:\n%s", page)
	}
	screenshot(t, ctx, dir, "00-url-credentials")

	// Not logged in: the challenge's page is the login form (the user
	// dismisses the browser's own sign-in dialog); once seen, a page
	// without a session sends the browser to /login.
	dismissSignIn(t, ctx)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(`input[name=user]`)); err != nil {
		t.Fatalf("the login form: %v", err)
	}
	screenshot(t, ctx, dir, "01-login")
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/masters"), chromedp.WaitVisible(`input[name=user]`)); err != nil {
		t.Fatalf("the login form, second visit: %v", err)
	}
	if p, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.pathname + location.search`)); err != nil || p != "/login?next=%2Fmasters" {
		t.Fatalf("a second visit without a session is at %q (%v), want /login?next=%%2Fmasters", p, err)
	}
	// A wrong password keeps us there.
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(`input[name=user]`, testUser), chromedp.SendKeys(`input[name=password]`, "wrong"),
		chromedp.Submit(`form.login`), chromedp.WaitVisible(`p.error`)); err != nil {
		t.Fatalf("a wrong password: %v", err)
	}
	if msg := text(t, ctx, `p.error`); !strings.Contains(msg, "Wrong user or password") {
		t.Fatalf("a wrong password shows %q", msg)
	}
	login(t, ctx, base)
	page, user := text(t, ctx, `#masters`), text(t, ctx, `.who`)
	for _, m := range c.MasterAddrs() {
		if !strings.Contains(page, m) {
			t.Errorf("the follower's masters page lacks %s:\n%s", m, page)
		}
	}
	if !strings.Contains(user, testUser) {
		t.Errorf("the header does not name the user: %q", user)
	}
	// On a loaded machine leadership may move; the page follows it.
	var oldLeader string
	ok := testutil.Eventually(30*time.Second, func() bool {
		oldLeader = c.Leader().Addr
		page = reloadMasters(t, ctx, base)
		return rowHas(page, oldLeader, "leader") && strings.Count(page, "follower") == 2
	})
	if !ok {
		t.Errorf("want %s leading and two followers:\n%s", oldLeader, page)
	}
	screenshot(t, ctx, dir, "02-masters")

	// Kill the leader: the page shows it down and another one leading.
	l := c.Leader()
	if l == follower {
		// It was elected in the meantime: watch from another master.
		for _, m := range c.Masters {
			if m != l {
				follower = m
			}
		}
		base = "http://" + follower.Addr
		login(t, ctx, base)
	}
	oldLeader = l.Addr
	l.Kill()
	newLeader := c.Leader().Addr
	ok = testutil.Eventually(30*time.Second, func() bool {
		page = reloadMasters(t, ctx, base)
		newLeader = c.Leader().Addr
		return rowHas(page, newLeader, "leader") && rowHas(page, oldLeader, "down")
	})
	if !ok {
		t.Fatalf("after killing %s the page never showed %s leading and %s down:\n%s", oldLeader, newLeader, oldLeader, page)
	}
	screenshot(t, ctx, dir, "03-masters-after-failover")

	// Topology and volumes.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/topology"), chromedp.WaitVisible(`img.topo`)); err != nil {
		t.Fatalf("topology: %v", err)
	}
	page = text(t, ctx, `main`)
	for _, want := range []string{"Data center dc1", "Data center dc2", "Rack r2", c.Volume[0].Addr} {
		if !strings.Contains(page, want) {
			t.Errorf("the topology page lacks %q", want)
		}
	}
	screenshot(t, ctx, dir, "04-topology")
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/volumes?sort=size&desc=1"), chromedp.WaitVisible(`#volumes`)); err != nil {
		t.Fatalf("volumes: %v", err)
	}
	if page := text(t, ctx, `#volumes`); !strings.Contains(page, "pics") {
		t.Errorf("the volumes page lacks the collection pics:\n%s", page)
	}
	screenshot(t, ctx, dir, "05-volumes")

	// A balance dry run, through the follower, under the admin lock.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/maintenance"),
		chromedp.Click(`#op-balance button`), chromedp.WaitVisible(`#output`)); err != nil {
		t.Fatalf("start the balance dry run: %v", err)
	}
	var state string
	ok = testutil.Eventually(60*time.Second, func() bool {
		if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
			t.Fatalf("the job page: %v", err)
		}
		state = text(t, ctx, `#state`)
		return !strings.Contains(state, "running")
	})
	out := text(t, ctx, `#output`)
	if !ok || !strings.Contains(state, "finished") {
		t.Fatalf("the balance dry run did not finish well: %q\n%s", state, out)
	}
	applyButtons, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#apply button").length`))
	if err != nil {
		t.Fatal(err)
	}
	if applyButtons != 1 {
		t.Errorf("the plan's page has no apply button")
	}
	t.Logf("balance plan:\n%s", out)
	screenshot(t, ctx, dir, "06-balance-plan")

	// Log out: the pages are closed again.
	if err := chromedp.Do(ctx, chromedp.Click(`.who button`), chromedp.WaitVisible(`input[name=user]`)); err != nil {
		t.Fatalf("log out: %v", err)
	}
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET / without credentials: %d", resp.StatusCode)
	}
}

// login logs in through the form of the master at base.
func login(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/login?next=/"), chromedp.WaitVisible(`input[name=user]`), chromedp.SendKeys(`input[name=user]`, testUser),
		chromedp.SendKeys(`input[name=password]`, testPassword),
		chromedp.Submit(`form.login`), chromedp.WaitVisible(`#masters`)); err != nil {
		t.Fatalf("log in on %s: %v", base, err)
	}
}

func reloadMasters(t *testing.T, ctx context.Context, base string) string {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/masters"), chromedp.WaitVisible(`#masters`)); err != nil {
		t.Fatalf("the masters page: %v", err)
	}
	return text(t, ctx, `#masters`)
}

// rowHas says whether the line of the masters table naming addr also
// says word.
func rowHas(table, addr, word string) bool {
	for _, line := range strings.Split(table, "\n") {
		if strings.Contains(line, addr) && strings.Contains(line, word) {
			return true
		}
	}
	return false
}

// TestBrowserBucketsAndFiles: create a bucket in the browser and see it
// through the S3 API; upload files with the plain form and by drag and
// drop, read them back through the filer; make a folder, rename, delete.
func TestBrowserBucketsAndFiles(t *testing.T) {
	ctx := browser(t)
	dir := artifactDir(t)
	var filerAddr atomic.Value
	filerAddr.Store("")
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}, AdminUI: func(m *master.Server) http.Handler {
		ui, err := adminui.New(adminui.Config{User: testUser, Password: testPassword, Source: m,
			Logger: slog.New(slog.DiscardHandler), Filer: func() string { return filerAddr.Load().(string) }})
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
	base := "http://" + c.Master.Addr
	login(t, ctx, base)

	// A bucket.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/buckets"), chromedp.WaitVisible(`#create-bucket`),
		chromedp.SendKeys(`#create-bucket input[name=name]`, "ui-bucket"), chromedp.Submit(`#create-bucket`)); err != nil {
		t.Fatalf("create a bucket: %v", err)
	}
	waitShown(t, ctx, `#buckets`, "the new bucket", has("ui-bucket"))
	if page := text(t, ctx, `#buckets`); !strings.Contains(page, "ui-bucket") {
		t.Fatalf("the buckets page lacks the new bucket:\n%s", page)
	}
	screenshot(t, ctx, dir, "11-buckets")
	s3c := s3sdk.New(s3sdk.Options{BaseEndpoint: aws.String(gw.URL()), Region: "us-east-1", UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKUI", SecretAccessKey: "secret-ui"}, nil
		})})
	lb, err := s3c.ListBuckets(context.Background(), &s3sdk.ListBucketsInput{})
	if err != nil {
		t.Fatalf("S3 ListBuckets: %v", err)
	}
	if len(lb.Buckets) != 1 || aws.ToString(lb.Buckets[0].Name) != "ui-bucket" {
		t.Fatalf("S3 lists %d buckets, want ui-bucket", len(lb.Buckets))
	}
	if _, err := s3c.HeadBucket(context.Background(), &s3sdk.HeadBucketInput{Bucket: aws.String("ui-bucket")}); err != nil {
		t.Fatalf("S3 HeadBucket: %v", err)
	}

	// Upload with the plain form.
	local := filepath.Join(t.TempDir(), "hello.txt")
	want := "hello from the browser\n"
	os.WriteFile(local, []byte(want), 0o644)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/files?path=/buckets/ui-bucket/"), chromedp.WaitVisible(`#upload`),
		chromedp.SetUploadFiles(`#upload input[type=file]`, []string{local}), chromedp.Submit(`#upload`)); err != nil {
		t.Fatalf("upload: %v", err)
	}
	waitShown(t, ctx, `#files`, "the uploaded file", has("hello.txt"))
	if got := filerGet(t, fs.Addr(), "/buckets/ui-bucket/hello.txt"); got != want {
		t.Fatalf("the filer has %q, want %q", got, want)
	}
	obj, err := s3c.GetObject(context.Background(), &s3sdk.GetObjectInput{Bucket: aws.String("ui-bucket"), Key: aws.String("hello.txt")})
	if err != nil {
		t.Fatalf("S3 GetObject: %v", err)
	}
	b, _ := io.ReadAll(obj.Body)
	obj.Body.Close()
	if string(b) != want {
		t.Fatalf("S3 reads %q", b)
	}
	// Drag and drop: a drop event carrying a file, as a browser makes it.
	if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[any](`(() => { const dt = new DataTransfer();
			dt.items.add(new File(["dropped bytes"], "dropped.txt", {type: "text/plain"}));
			document.querySelector(".drop").dispatchEvent(new DragEvent("drop", {dataTransfer: dt, bubbles: true, cancelable: true}));
			return true })()`)(ctx, tg)
		return err
	})); err != nil {
		t.Fatalf("drop: %v", err)
	}
	if !testutil.Eventually(20*time.Second, func() bool {
		resp, err := http.Get("http://" + fs.Addr() + "/buckets/ui-bucket/dropped.txt")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}) {
		t.Fatalf("the dropped file never reached the filer")
	}
	if got := filerGet(t, fs.Addr(), "/buckets/ui-bucket/dropped.txt"); got != "dropped bytes" {
		t.Fatalf("the dropped file has %q", got)
	}
	// The drop submits the upload form; wait for the listing it leads to,
	// or the next navigation races the form's and is aborted.
	waitShown(t, ctx, `#files`, "the dropped file", has("dropped.txt"))

	// A folder, a rename, a download link, a delete.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/files?path=/buckets/ui-bucket/"), chromedp.WaitVisible(`#mkdir`),
		chromedp.SendKeys(`#mkdir input[name=name]`, "sub"), chromedp.Submit(`#mkdir`)); err != nil {
		t.Fatalf("mkdir: %v", err)
	}
	waitShown(t, ctx, `#files`, "the new folder", has("sub/"))
	if err := chromedp.Do(ctx,
		chromedp.SetValue(`form[action="/files/rename"]:has(input[value="/buckets/ui-bucket/hello.txt"]) input[name=name]`, "renamed.txt"),
		chromedp.Submit(`form[action="/files/rename"]:has(input[value="/buckets/ui-bucket/hello.txt"])`)); err != nil {
		t.Fatalf("rename: %v", err)
	}
	waitShown(t, ctx, `#files`, "the renamed file", has("renamed.txt"))
	if got := filerGet(t, fs.Addr(), "/buckets/ui-bucket/renamed.txt"); got != want {
		t.Fatalf("after the rename the filer has %q", got)
	}
	page := text(t, ctx, `#files`)
	for _, w := range []string{"sub/", "renamed.txt", "dropped.txt"} {
		if !strings.Contains(page, w) {
			t.Errorf("the listing lacks %s:\n%s", w, page)
		}
	}
	screenshot(t, ctx, dir, "12-files")
	// The confirmation dialog says yes.
	if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`(() => { window.confirm = () => true; return true })()`)(ctx, tg)
		return err
	}), chromedp.Click(`form[action="/files/delete"]:has(input[value="/buckets/ui-bucket/dropped.txt"]) button`)); err != nil {
		t.Fatalf("delete: %v", err)
	}
	waitShown(t, ctx, `#files`, "the listing without the deleted file", hasNot("dropped.txt"))
	if !testutil.Eventually(10*time.Second, func() bool {
		resp, err := http.Get("http://" + fs.Addr() + "/buckets/ui-bucket/dropped.txt")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 404
	}) {
		t.Errorf("dropped.txt is still there after its delete")
	}
}

func filerGet(t *testing.T, addr, p string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + p)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s from the filer: %d %s", p, resp.StatusCode, b)
	}
	return string(b)
}

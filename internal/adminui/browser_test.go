package adminui_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kelpfs/kelp/internal/adminui"
	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/master"
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
func browser(t *testing.T) context.Context {
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (scripts/test-deps.sh installs it)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1400, 1000), chromedp.Flag("no-proxy-server", true))
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

// text reads the visible text of the first element sel names.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(sel))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
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

	// Not logged in: the login form.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(`input[name=user]`)); err != nil {
		t.Fatalf("the login form: %v", err)
	}
	screenshot(t, ctx, dir, "01-login")
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

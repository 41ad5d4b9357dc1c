package adminui_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/kelpfs/kelp/internal/adminui"
	"github.com/kelpfs/kelp/internal/s3"
)

// TestS3KeyEditsOfTwoUIsBothSurvive edits the shared access keys from two
// UIs at once, as two masters' UIs (or two admins) do: an edit that read
// the file before the other one wrote it is made again on the new file,
// not written over it. A proxy in front of UI A's filer holds A's read of
// the identity file until UI B has created a key, the lost update of a
// plain read-modify-write; then many edits race from both UIs.
func TestS3KeyEditsOfTwoUIsBothSurvive(t *testing.T) {
	u := startUICluster(t)
	filer := "http://" + u.fs.Addr()
	var armed atomic.Bool
	var bKeys []string
	secrets := map[string]string{}
	var secretsMu sync.Mutex
	keep := func(page string) string {
		ak, sk := akRe.FindStringSubmatch(page), skRe.FindStringSubmatch(page)
		if ak == nil || sk == nil {
			return ""
		}
		secretsMu.Lock()
		secrets[ak[1]] = sk[1]
		secretsMu.Unlock()
		return ak[1]
	}
	createB := func() string {
		code, page := u.call(t, "POST", "/s3keys/create", url.Values{"name": {"from-b"}, "action": {"List"}, "csrf": {u.token(t)}}, true)
		ak := keep(page)
		if code != 200 || ak == "" {
			t.Errorf("UI B's create: %d\n%s", code, page)
		}
		return ak
	}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, filer+r.URL.RequestURI(), r.Body)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if r.Method == http.MethodGet && r.URL.Path == s3.SharedIdentitiesPath && armed.CompareAndSwap(true, false) {
			// A has read the file; B edits it before A gets the answer.
			done := make(chan string, 1)
			go func() { done <- createB() }()
			select {
			case ak := <-done:
				bKeys = append(bKeys, ak)
			case <-time.After(20 * time.Second):
				t.Error("UI B's create did not finish while UI A's edit was under way")
			}
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(body)
	}))
	t.Cleanup(proxy.Close)
	proxyAddr := strings.TrimPrefix(proxy.URL, "http://")
	a, err := adminui.New(adminui.Config{User: testUser, Password: testPassword, Source: u.c.Master.Master(),
		Logger: slog.New(slog.DiscardHandler), Filer: func() string { return proxyAddr }})
	if err != nil {
		t.Fatal(err)
	}
	callA := func(method, p string, form url.Values) (int, string) {
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req := httptest.NewRequest(method, p, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		req.SetBasicAuth(testUser, testPassword)
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	_, page := callA("GET", "/s3keys", nil)
	m := tokenRe.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on UI A's keys page:\n%s", page)
	}
	tokA := m[1]
	var aKeys []string
	createA := func(name string) {
		code, page := callA("POST", "/s3keys/create", url.Values{"name": {name}, "action": {"List"}, "csrf": {tokA}})
		ak := keep(page)
		if code != 200 || ak == "" {
			t.Fatalf("UI A's create: %d\n%s", code, page)
		}
		aKeys = append(aKeys, ak)
	}
	// Round 1: no file yet (A creates it, B got there first); round 2:
	// the file is there (A replaces the version it read, B changed it).
	for _, name := range []string{"from-a", "from-a2"} {
		armed.Store(true)
		createA(name)
		if armed.Load() {
			t.Fatal("UI A's edit did not read the identity file through its filer")
		}
	}
	if len(bKeys) != 2 || bKeys[0] == "" || bKeys[1] == "" {
		t.Fatalf("UI B's creates: %v", bKeys)
	}
	_, list := u.call(t, "GET", "/s3keys", nil, true)
	for _, k := range append(append([]string{}, aKeys...), bKeys...) {
		if !strings.Contains(list, k) {
			t.Errorf("key %s was lost; the keys page lists:\n%s", k, list)
		}
	}
	// The running gateway takes both UIs' keys.
	for _, ak := range []string{aKeys[0], bKeys[0]} {
		cl := s3Client(u.gw, ak, secrets[ak])
		eventually(t, "the gateway takes "+ak, func() bool {
			_, err := cl.ListBuckets(context.Background(), &s3sdk.ListBucketsInput{})
			return err == nil
		})
	}

	// Many edits from both UIs at once: every one is in.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var raced []string
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var code int
			var page string
			if i%2 == 0 {
				code, page = callA("POST", "/s3keys/create", url.Values{"name": {"race"}, "action": {"List"}, "csrf": {tokA}})
			} else {
				code, page = u.call(t, "POST", "/s3keys/create", url.Values{"name": {"race"}, "action": {"List"}, "csrf": {u.token(t)}}, true)
			}
			ak := akRe.FindStringSubmatch(page)
			if code != 200 || ak == nil {
				t.Errorf("concurrent create %d: %d\n%s", i, code, page)
				return
			}
			mu.Lock()
			raced = append(raced, ak[1])
			mu.Unlock()
		}()
	}
	wg.Wait()
	_, list = u.call(t, "GET", "/s3keys", nil, true)
	for _, k := range raced {
		if !strings.Contains(list, k) {
			t.Errorf("concurrent key %s was lost", k)
		}
	}
	if n := bytes.Count([]byte(list), []byte("KELP")); n < 4+6 {
		t.Errorf("the keys page lists %d keys, want 10", n)
	}
}

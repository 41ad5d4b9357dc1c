package webdav

import (
	"strings"
	"testing"
)

// sharedLockBody asks for a shared write lock owned by owner.
func sharedLockBody(owner string) string {
	return `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:shared/></D:lockscope>` +
		`<D:locktype><D:write/></D:locktype><D:owner><D:href>` + owner + `</D:href></D:owner></D:lockinfo>`
}

// lock takes a lock and returns its Lock-Token header value (<token>).
func lock(t *testing.T, url, body, depth string, want int) string {
	t.Helper()
	c, h, resp := do(t, "LOCK", url, body, "Depth", depth, "Timeout", "Second-600", "Content-Type", "application/xml")
	wantCode(t, "LOCK "+url, c, want)
	if want/100 == 2 && !strings.Contains(resp, "<D:lockdiscovery>") {
		t.Fatalf("LOCK answer has no lockdiscovery: %s", resp)
	}
	return h.Get("Lock-Token")
}

func propfind(t *testing.T, url, depth string) string {
	t.Helper()
	c, _, body := do(t, "PROPFIND", url, "", "Depth", depth)
	wantCode(t, "PROPFIND "+url, c, 207)
	return body
}

func TestWebDAVSharedLocks(t *testing.T) {
	s := startFilerOnly(t)
	u, _ := davServer(t, s, "/")
	c, _, _ := do(t, "PUT", u+"/f", "v1")
	wantCode(t, "PUT", c, 201)

	a := lock(t, u+"/f", sharedLockBody("alice"), "0", 200)
	b := lock(t, u+"/f", sharedLockBody("bob"), "0", 200)
	if a == b || a == "" {
		t.Fatalf("two shared locks got tokens %q and %q", a, b)
	}
	lock(t, u+"/f", lockBody, "0", 423) // exclusive conflicts with both

	body := propfind(t, u+"/f", "0")
	for _, want := range []string{trim(a), trim(b), "alice", "bob", "<D:shared/>", "<D:depth>0</D:depth>",
		"<D:lockroot><D:href>/f</D:href></D:lockroot>", "<D:timeout>Second-"} {
		if !strings.Contains(body, want) {
			t.Fatalf("PROPFIND lockdiscovery lacks %q:\n%s", want, body)
		}
	}
	if strings.Count(body, "<D:lockentry") != 2 || !strings.Contains(body, "<D:lockscope><D:shared/></D:lockscope><D:locktype>") {
		t.Fatalf("supportedlock is not exclusive and shared write:\n%s", body)
	}

	c, _, _ = do(t, "PUT", u+"/f", "v2")
	wantCode(t, "PUT without a token", c, 423)
	c, _, _ = do(t, "PUT", u+"/f", "v2", "If", "("+b+")")
	wantCode(t, "PUT with bob's token", c, 204)

	c, _, _ = do(t, "UNLOCK", u+"/f", "", "Lock-Token", a)
	wantCode(t, "UNLOCK alice", c, 204)
	lock(t, u+"/f", lockBody, "0", 423) // bob still holds his
	c, _, _ = do(t, "UNLOCK", u+"/f", "", "Lock-Token", b)
	wantCode(t, "UNLOCK bob", c, 204)
	if body := propfind(t, u+"/f", "0"); strings.Contains(body, "activelock") {
		t.Fatalf("lockdiscovery after both UNLOCKs still shows a lock:\n%s", body)
	}
	x := lock(t, u+"/f", lockBody, "0", 200)
	lock(t, u+"/f", sharedLockBody("carol"), "0", 423) // shared conflicts with exclusive
	c, _, _ = do(t, "UNLOCK", u+"/f", "", "Lock-Token", x)
	wantCode(t, "UNLOCK exclusive", c, 204)
}

func trim(token string) string { return strings.Trim(token, "<>") }

func TestWebDAVSharedLockDepth(t *testing.T) {
	s := startFilerOnly(t)
	u, _ := davServer(t, s, "/")
	for _, p := range []string{"/c", "/d"} {
		c, _, _ := do(t, "MKCOL", u+p, "")
		wantCode(t, "MKCOL "+p, c, 201)
		c, _, _ = do(t, "PUT", u+p+"/f", "v1")
		wantCode(t, "PUT "+p+"/f", c, 201)
	}
	tok := lock(t, u+"/c", sharedLockBody("alice"), "infinity", 200)
	lock(t, u+"/c", sharedLockBody("bob"), "infinity", 200)

	c, _, _ := do(t, "PUT", u+"/c/f", "v2")
	wantCode(t, "PUT of a member without the token", c, 423)
	c, _, _ = do(t, "PUT", u+"/c/new", "v2")
	wantCode(t, "PUT of a new member without the token", c, 423)
	lock(t, u+"/c/f", lockBody, "0", 423)
	lock(t, u+"/", lockBody, "infinity", 423)
	if body := propfind(t, u+"/c/f", "0"); !strings.Contains(body, "<D:lockroot><D:href>/c</D:href></D:lockroot>") ||
		!strings.Contains(body, "<D:depth>infinity</D:depth>") {
		t.Fatalf("a member's lockdiscovery lacks the collection's lock:\n%s", body)
	}
	c, _, _ = do(t, "PUT", u+"/c/f", "v2", "If", "("+tok+")")
	wantCode(t, "PUT of a member with the token", c, 204)

	// A depth-0 lock of a collection leaves its members free.
	lock(t, u+"/d", lockBody, "0", 200)
	c, _, _ = do(t, "PUT", u+"/d/f", "v2")
	wantCode(t, "PUT of a member of a depth-0 locked collection", c, 204)
	lock(t, u+"/d/f", lockBody, "0", 200)
}

func TestWebDAVLockedMemberBlocksCollection(t *testing.T) {
	s := startFilerOnly(t)
	u, _ := davServer(t, s, "/")
	for _, p := range []string{"/p", "/p/sub", "/q"} {
		c, _, _ := do(t, "MKCOL", u+p, "")
		wantCode(t, "MKCOL "+p, c, 201)
	}
	c, _, _ := do(t, "PUT", u+"/p/sub/f", "v1")
	wantCode(t, "PUT", c, 201)
	tok := lock(t, u+"/p/sub/f", lockBody, "0", 200)

	c, _, _ = do(t, "DELETE", u+"/p", "")
	wantCode(t, "DELETE of the parent of a locked member", c, 423)
	c, _, _ = do(t, "MOVE", u+"/p", "", "Destination", u+"/p2")
	wantCode(t, "MOVE of the parent of a locked member", c, 423)
	c, _, _ = do(t, "COPY", u+"/q", "", "Destination", u+"/p", "Overwrite", "T")
	wantCode(t, "COPY over the parent of a locked member", c, 423)
	lock(t, u+"/p", lockBody, "infinity", 423)
	c, _, got := do(t, "GET", u+"/p/sub/f", "")
	if c != 200 || got != "v1" {
		t.Fatalf("after the refused requests GET answered %d %q", c, got)
	}

	c, _, _ = do(t, "MOVE", u+"/p", "", "Destination", u+"/p2", "If", "("+tok+")")
	wantCode(t, "MOVE of the parent with the member's token", c, 201)
	// The lock went with its resource's name (RFC 4918 7.7): nothing holds /p2.
	c, _, _ = do(t, "PUT", u+"/p2/sub/f", "v2")
	wantCode(t, "PUT of the moved member", c, 204)

	tok = lock(t, u+"/p2/sub/f", lockBody, "0", 200)
	c, _, _ = do(t, "DELETE", u+"/p2", "", "If", "("+tok+")")
	wantCode(t, "DELETE of the parent with the member's token", c, 204)
	// The deleted member's lock went too: a new file of that name is free.
	for _, p := range []string{"/p2", "/p2/sub"} {
		c, _, _ := do(t, "MKCOL", u+p, "")
		wantCode(t, "MKCOL "+p, c, 201)
	}
	if c, _, _ = do(t, "PUT", u+"/p2/sub/f", "v3"); c/100 != 2 {
		t.Fatalf("PUT of a new file where a deleted locked one was answered %d", c)
	}
}

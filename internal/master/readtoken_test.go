package master

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/fid"
)

// TestReadTokenNeedsIdentity: a master with a read key hands out read
// tokens (GET /dir/readtoken) only to callers it can identify. Without
// access tokens it has no way to, and refuses (401) a plain request; with
// them, no token is 401 and a read-only token gets a token that verifies
// with the read key for that file id only.
func TestReadTokenNeedsIdentity(t *testing.T) {
	reader := auth.NewSigner("read-key-for-tokens", time.Minute)
	id := fid.FileID{Volume: 3, Key: 0x01, Cookie: 0x637037d6}
	ask := func(s *Server, tok string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+s.HTTPAddr()+"/dir/readtoken?fileId="+id.String(), nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	open := startMaster(t, t.TempDir(), func(c *Config) { c.ReadSigner = reader })
	if st, body := ask(open, ""); st != http.StatusUnauthorized || strings.Contains(body, "auth\"") {
		t.Errorf("read token without access tokens, anonymous: %d %s; want 401 and no token", st, body)
	}

	viewer := auth.NewToken()
	access, err := auth.NewAccess("", auth.NewSigner("signing-key-x", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	access.Add(viewer, "viewer", auth.RoleRead)
	guarded := startMaster(t, t.TempDir(), func(c *Config) { c.ReadSigner, c.Access = reader, access })
	if st, body := ask(guarded, ""); st != http.StatusUnauthorized {
		t.Errorf("read token with access tokens, anonymous: %d %s; want 401", st, body)
	}
	if st, body := ask(guarded, auth.NewToken()); st != http.StatusUnauthorized {
		t.Errorf("read token with an unknown token: %d %s; want 401", st, body)
	}
	st, body := ask(guarded, viewer)
	var ans struct{ Auth string }
	if st != http.StatusOK || json.Unmarshal([]byte(body), &ans) != nil || ans.Auth == "" {
		t.Fatalf("read token with a read-only token: %d %s", st, body)
	}
	if err := reader.Verify(ans.Auth, id); err != nil {
		t.Errorf("the read token does not verify: %v", err)
	}
	if err := reader.Verify(ans.Auth, fid.FileID{Volume: 3, Key: 0x02, Cookie: 0x637037d6}); err == nil {
		t.Error("the read token verifies for another file id")
	}
}

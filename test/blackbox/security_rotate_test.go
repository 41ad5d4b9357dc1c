package blackbox

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/fid"
)

// TestSecurityRotationWithoutRestart rotates the access tokens and the JWT
// signing key of a running `kelp server` by editing their files, as
// docs/security.md tells an operator to: no restart. A token added to the
// tokens file is taken, a removed one refused; the signing key file goes
// old → old+new → new+old → new, writes through the filer keep working at
// every step, and at the end the volume server refuses a token signed
// with the old key and takes one signed with the new.
func TestSecurityRotationWithoutRestart(t *testing.T) {
	dir := t.TempDir()
	oldKey, newKey := "oldkey-"+auth.NewToken(), "newkey-"+auth.NewToken()
	oldTok, newTok := "oldtok-"+auth.NewToken(), "newtok-"+auth.NewToken()
	keyFile, tokFile := filepath.Join(dir, "jwt.key"), filepath.Join(dir, "tokens")
	replace := func(f string, lines ...string) {
		t.Helper()
		st, _ := os.Stat(f)
		if err := os.WriteFile(f+".tmp", []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if st != nil { // a new modification time even on a coarse clock
			os.Chtimes(f+".tmp", time.Now(), st.ModTime().Add(time.Second))
		}
		if err := os.Rename(f+".tmp", f); err != nil {
			t.Fatal(err)
		}
	}
	replace(keyFile, oldKey)
	replace(tokFile, "ops rw "+oldTok)
	var ports serverPorts
	p := startServer(t, filepath.Join(dir, "data"), &ports, "--jwt.signing.key=@"+keyFile, "--access.tokens="+tokFile,
		"--s3.access-key=rotak0000000001", "--s3.secret-key=rotsk-"+auth.NewToken())
	c := &secClient{t: t}
	master, volume, filerURL := "http://"+hostport(ports.master), "http://"+hostport(ports.volume), "http://"+hostport(ports.filer)
	put := func(tok, name string) int {
		st, _ := c.do("PUT", filerURL+"/"+name, tok, []byte("content of "+name))
		return st
	}
	waitFor(t, "a filer write with the first token", func() bool { return put(oldTok, "first.txt")/100 == 2 })

	// Tokens: add the new one, move to it, remove the old one.
	if st := put(newTok, "early.txt"); st != 401 {
		t.Fatalf("a token not yet in the file: %d, want 401", st)
	}
	replace(tokFile, "ops rw "+oldTok, "ops2 rw "+newTok)
	waitFor(t, "the added token", func() bool { return put(newTok, "added.txt")/100 == 2 })
	replace(tokFile, "ops2 rw "+newTok)
	waitFor(t, "the removed token refused", func() bool { return put(oldTok, "removed.txt") == 401 })
	if st := put(newTok, "after.txt"); st/100 != 2 {
		t.Errorf("the remaining token after the removal: %d", st)
	}

	// The signing key: each step, writes through the filer (master signs,
	// volume server verifies) keep working.
	step := 0
	for _, keys := range [][]string{{oldKey, newKey}, {newKey, oldKey}, {newKey}} {
		replace(keyFile, keys...)
		step++
		for i := range 5 {
			if st := put(newTok, "step"+string(rune('0'+step))+"-"+string(rune('0'+i))+".txt"); st/100 != 2 {
				t.Errorf("key step %d: a filer write: %d\n%s", step, st, tail(p.log.String()))
			}
		}
	}
	assign := func() (fid.FileID, string) {
		t.Helper()
		st, body := c.do("GET", master+"/dir/assign", newTok, nil)
		if st != 200 {
			t.Fatalf("assign: %d %s", st, body)
		}
		var a struct{ Fid, Auth string }
		json.Unmarshal([]byte(body), &a)
		id, err := fid.Parse(a.Fid)
		if err != nil {
			t.Fatal(err)
		}
		return id, a.Auth
	}
	waitFor(t, "the old key refused", func() bool {
		id, _ := assign()
		st, _ := c.do("PUT", volume+"/"+id.String(), auth.NewSigner(oldKey, time.Minute).Sign(id, 1), []byte("old"))
		return st == 401
	})
	id, tok := assign()
	if err := auth.NewSigner(newKey, time.Minute).Verify(tok, id); err != nil {
		t.Errorf("the master does not sign with the new key: %v", err)
	}
	id, _ = assign()
	if st, body := c.do("PUT", volume+"/"+id.String(), auth.NewSigner(newKey, time.Minute).Sign(id, 1), []byte("new")); st != 201 {
		t.Errorf("a token of the new key: %d %s", st, body)
	}
	for _, s := range []string{oldKey, newKey, oldTok, newTok} {
		if strings.Contains(p.log.String(), s) {
			t.Error("a key or token appears in the server's log")
		}
	}
}

package blackbox

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestS3KeyThatIsAlsoAPrefix: with the aws CLI against `kelp server`, the
// keys "a", "a/" and "a/b" exist together and list in S3's order; the
// filer's HTTP API shows the directory a meanwhile, and the file a again
// once nothing collides with it.
func TestS3KeyThatIsAlsoAPrefix(t *testing.T) {
	var ports serverPorts
	p := startServer(t, t.TempDir(), &ports, "--s3.access-key="+s3AccessKey, "--s3.secret-key="+s3SecretKey)
	s := &s3Server{proc: p, hostport: hostport(ports.s3)}
	s.endpoint = "http://" + s.hostport
	a := awsCLI(t, s, s3SecretKey)
	work := t.TempDir()
	a.aws(s, "s3api", "create-bucket", "--bucket", "samekey")
	for _, k := range []string{"a", "a/b", "a/"} {
		f := filepath.Join(work, "in")
		writeFile(t, f, []byte("body of "+k))
		a.aws(s, "s3api", "put-object", "--bucket", "samekey", "--key", k, "--body", f)
	}
	var list struct {
		Contents       []struct{ Key string }
		CommonPrefixes []struct{ Prefix string }
	}
	jsonOut(t, a.aws(s, "s3api", "list-objects-v2", "--bucket", "samekey"), &list)
	var keys []string
	for _, c := range list.Contents {
		keys = append(keys, c.Key)
	}
	if !slices.Equal(keys, []string{"a", "a/", "a/b"}) {
		t.Fatalf("list-objects-v2: %q", keys)
	}
	list.Contents = nil
	jsonOut(t, a.aws(s, "s3api", "list-objects-v2", "--bucket", "samekey", "--delimiter", "/"), &list)
	if len(list.Contents) != 1 || list.Contents[0].Key != "a" || len(list.CommonPrefixes) != 1 || list.CommonPrefixes[0].Prefix != "a/" {
		t.Fatalf("list-objects-v2 --delimiter /: %+v", list)
	}
	filerEntry := func() (isDir bool, size int64) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+hostport(ports.filer)+"/buckets/samekey/", nil)
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var l struct {
			Entries []struct {
				Name  string
				IsDir bool
				Size  int64
			}
		}
		if err := json.Unmarshal(body, &l); err != nil || len(l.Entries) != 1 || l.Entries[0].Name != "a" {
			t.Fatalf("filer listing of the bucket: %s (%v)", body, err)
		}
		return l.Entries[0].IsDir, l.Entries[0].Size
	}
	if isDir, _ := filerEntry(); !isDir {
		t.Fatal("the filer does not show the directory a while a/b exists")
	}
	a.aws(s, "s3api", "delete-object", "--bucket", "samekey", "--key", "a/b")
	a.aws(s, "s3api", "delete-object", "--bucket", "samekey", "--key", "a/")
	if isDir, size := filerEntry(); isDir || size != int64(len("body of a")) {
		t.Fatalf("the filer does not show the file a again: dir %v, size %d", isDir, size)
	}
	out := filepath.Join(work, "out")
	a.aws(s, "s3api", "get-object", "--bucket", "samekey", "--key", "a", out)
	if got, err := os.ReadFile(out); err != nil || string(got) != "body of a" {
		t.Fatalf("get-object a: %q %v", got, err)
	}
}

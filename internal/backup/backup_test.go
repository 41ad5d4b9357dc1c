package backup

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/kelpfs/kelp/internal/filer"
	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/filersync"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
	kelps3 "github.com/kelpfs/kelp/internal/s3"
	"github.com/kelpfs/kelp/internal/testcluster"
)

func startSite(t testing.TB) *filerserver.Server { return startSiteEnc(t, false) }

// startSiteEnc starts a cluster and a filer, encrypting data at rest when encrypt.
func startSiteEnc(t testing.TB, encrypt bool) *filerserver.Server {
	t.Helper()
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{MaxVolumes: 20}}})
	s, err := filerserver.New(filerserver.Config{Masters: c.MasterAddrs(), Dir: t.TempDir(), ChunkSize: 64 << 10,
		EncryptData: encrypt, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

func fileURL(s *filerserver.Server, p string) string {
	return "http://" + s.Addr() + (&url.URL{Path: p}).EscapedPath()
}

func send(t testing.TB, method, u string, body []byte) {
	t.Helper()
	for try := 0; ; try++ {
		req, _ := http.NewRequest(method, u, bytes.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if try > 50 {
			t.Fatalf("%s %s: %v", method, u, err)
		}
		time.Sleep(100 * time.Millisecond) // volume servers still registering
	}
}

// tree: path under root -> "d" or "size md5 mode mtime" of the content read
// through the filer's HTTP API.
func tree(t testing.TB, s *filerserver.Server, root string) map[string]string {
	t.Helper()
	site, err := filersync.OpenSite(context.Background(), "x", s.GRPCAddr(), 10*time.Second, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	out := map[string]string{}
	err = site.Walk(context.Background(), root, func(e *filerpb.Entry) error {
		rel := strings.TrimPrefix(e.Path, root)
		var xs []string
		for k, v := range e.Xattrs {
			xs = append(xs, k+"="+string(v))
		}
		slices.Sort(xs)
		attrs := fmt.Sprintf("%d:%d %q %v %v", e.Uid, e.Gid, e.Mime, e.UserMetadata, xs)
		if e.IsDir {
			out[rel] = fmt.Sprintf("d %o %s", os.FileMode(e.Mode).Perm(), attrs)
			return nil
		}
		resp, err := http.Get(fileURL(s, e.Path))
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out[rel] = fmt.Sprintf("%d %x %o %d %s", len(b), md5.Sum(b), os.FileMode(e.Mode).Perm(), e.MtimeNs, attrs)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diff(a, b map[string]string) string {
	var d []string
	for k, v := range a {
		if b[k] != v {
			d = append(d, fmt.Sprintf("%s: %q vs %q", k, v, b[k]))
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			d = append(d, fmt.Sprintf("%s: missing vs %q", k, v))
		}
	}
	return strings.Join(d, "\n")
}

func data(name string, n int) []byte {
	return bytes.Repeat([]byte(name+"|"), n/(len(name)+1)+1)[:n]
}

func TestBackupIncrementalRestore(t *testing.T) {
	dir := t.TempDir()
	dest, err := OpenDest(context.Background(), dir, S3Config{})
	if err != nil {
		t.Fatal(err)
	}
	backupScenario(t, startSite(t), dest, nil)
	if _, err := os.Stat(filepath.Join(dir, "data", "outside")); err == nil {
		t.Fatal("a file outside --path was backed up")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "data", "d0", "moved")); err != nil || string(b) != string(data("4", 97*4)) {
		t.Fatalf("renamed file in the backup directory: %q, %v", b, err)
	}
}

// TestBackupS3 backs up into Kelp's own S3 gateway (of a third cluster).
func TestBackupS3(t *testing.T) {
	fs := startSite(t)
	gw, err := kelps3.New(kelps3.Config{Namespace: fs.Filer(), Logger: slog.New(slog.DiscardHandler),
		Identities: []kelps3.Identity{{Name: "admin", Credentials: []kelps3.Credential{{AccessKey: "AKIDBACKUP", SecretKey: "backup-secret-0123"}}, Actions: []string{"Admin"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	cfg := S3Config{Endpoint: gw.URL(), AccessKey: "AKIDBACKUP", SecretKey: "backup-secret-0123"}
	if err := createBucket(cfg, "backups"); err != nil {
		t.Fatal(err)
	}
	dest, err := OpenDest(context.Background(), "s3://backups/site1/projects", cfg)
	if err != nil {
		t.Fatal(err)
	}
	backupScenario(t, startSite(t), dest, nil)
	if _, err := OpenDest(context.Background(), "s3://no-such-bucket/x", cfg); err == nil {
		t.Fatal("a missing bucket was accepted")
	}
}

func backupScenario(t *testing.T, src *filerserver.Server, dest Dest, key []byte) {
	for i := range 30 {
		send(t, http.MethodPut, fileURL(src, fmt.Sprintf("/p/d%d/f%d", i%4, i)), data(fmt.Sprint(i), 97*i))
	}
	send(t, http.MethodPut, fileURL(src, "/p/big"), data("big", 300<<10))
	send(t, http.MethodPut, fileURL(src, "/outside"), []byte("not backed up"))
	// Attributes besides mode and mtime are kept and restored too.
	modify(t, src, "/p/d1/f5", func(e *filer.Entry) {
		e.Mode, e.UID, e.GID, e.Mime = 0o640, 1001, 1002, "text/x-kelp"
		e.Meta = map[string]string{"k": "v"}
		e.Xattrs["user.colour"] = []byte("blue")
	})
	modify(t, src, "/p/d2", func(e *filer.Entry) { e.Mode = os.ModeDir | 0o750; e.Xattrs["user.dir"] = []byte("x") })
	cfg := Config{Filer: src.GRPCAddr(), Path: "/p", Dest: dest, Once: true, Key: key}
	st, err := Backup(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st.Copied.Load() != 31 || st.FullScans.Load() != 1 {
		t.Fatalf("first backup copied %d files in %d full scans, want 31 in 1", st.Copied.Load(), st.FullScans.Load())
	}

	// Changes: new, overwritten, deleted, renamed file and directory.
	send(t, http.MethodPut, fileURL(src, "/p/new"), []byte("new"))
	send(t, http.MethodPut, fileURL(src, "/p/d1/f1"), []byte("overwritten"))
	send(t, http.MethodDelete, fileURL(src, "/p/d2/f2"), nil)
	send(t, http.MethodPost, fileURL(src, "/p/d0/moved")+"?op=rename&from=/p/d0/f4", nil)
	send(t, http.MethodPost, fileURL(src, "/p/d3-moved")+"?op=rename&from=/p/d3", nil)
	send(t, http.MethodPost, fileURL(src, "/p/big")+"?op=append", []byte("tail"))
	modify(t, src, "/p/d1/f9", func(e *filer.Entry) { e.Mode = 0o600; e.Xattrs["user.late"] = []byte("1") })
	st, err = Backup(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st.Copied.Load() != 4 || st.FullScans.Load() != 0 {
		t.Errorf("incremental backup copied %d files (want 4: new, overwritten, appended, attributes changed), %d full scans", st.Copied.Load(), st.FullScans.Load())
	}
	// Nothing new: nothing copied.
	if st, err = Backup(context.Background(), cfg); err != nil || st.Copied.Load() != 0 {
		t.Fatalf("backup with nothing new: %v, copied %d", err, st.Copied.Load())
	}

	dst := startSite(t)
	rst, err := Restore(context.Background(), Config{Filer: dst.GRPCAddr(), Path: "/restored", Dest: dest, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(tree(t, src, "/p"), tree(t, dst, "/restored")); d != "" {
		t.Fatalf("restored tree differs:\n%s", d)
	}
	// A second restore finds everything in place.
	rst, err = Restore(context.Background(), Config{Filer: dst.GRPCAddr(), Path: "/restored", Dest: dest, Key: key})
	if err != nil || rst.Copied.Load() != 0 {
		t.Fatalf("second restore: %v, copied %d", err, rst.Copied.Load())
	}
	// A backup of another cluster into the same destination is refused.
	if _, err := Backup(context.Background(), Config{Filer: dst.GRPCAddr(), Path: "/p", Dest: dest, Once: true, Key: key}); err == nil {
		t.Fatal("backup of another cluster into the same destination was accepted")
	}
}

func modify(t testing.TB, s *filerserver.Server, p string, fn func(e *filer.Entry)) {
	t.Helper()
	if err := s.Filer().ModifyEntry(context.Background(), p, func(e *filer.Entry) error { fn(e); return nil }); err != nil {
		t.Fatalf("modify %s: %v", p, err)
	}
}

func createBucket(cfg S3Config, bucket string) error {
	_, err := newS3Client(cfg).CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	return err
}

// TestBackupEncrypted: a backup of a filer that encrypts data at rest is
// refused without a key; with one, the backup directory holds no plaintext
// of any file (every byte of every file scanned), the incremental runs
// recognise unchanged files, and restore gives back identical files.
// Restore without the key or with another one, or of a changed file, fails.
func TestBackupEncrypted(t *testing.T) {
	src := startSiteEnc(t, true)
	key, err := DeriveKey("backup-secret-" + strings.Repeat("x", 8))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dest, err := OpenDest(context.Background(), dir, S3Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Backup(context.Background(), Config{Filer: src.GRPCAddr(), Path: "/p", Dest: dest, Once: true}); err == nil || !strings.Contains(err.Error(), "--encrypt.key") {
		t.Fatalf("a plaintext backup of an encrypting filer: %v, want a refusal naming --encrypt.key", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "state.json")); err == nil {
		t.Fatal("the refused backup wrote its state")
	}
	backupScenario(t, src, dest, key)

	// The scan: no file under the backup holds any of the plaintexts.
	markers := [][]byte{[]byte("big|big|big|"), []byte("overwritten"), []byte("17|17|17|"), []byte("4|4|4|4|")}
	files := 0
	err = filepath.WalkDir(dir, func(p string, de os.DirEntry, err error) error {
		if err != nil || !de.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		for _, m := range markers {
			if bytes.Contains(b, m) {
				t.Errorf("%s holds the plaintext %q", p, m)
			}
		}
		return nil
	})
	if err != nil || files < 30 {
		t.Fatalf("scanned %d files: %v", files, err)
	}

	dst := startSite(t)
	if _, err := Restore(context.Background(), Config{Filer: dst.GRPCAddr(), Path: "/nokey", Dest: dest}); err == nil {
		t.Error("restore of an encrypted backup without the key succeeded")
	}
	other, _ := DeriveKey("another-secret-0123456")
	if _, err := Restore(context.Background(), Config{Filer: dst.GRPCAddr(), Path: "/otherkey", Dest: dest, Key: other}); !errors.Is(err, ErrBadKey) {
		t.Errorf("restore with another key: %v, want ErrBadKey", err)
	}
	// A changed byte in a file's content: its restore fails, never wrong bytes.
	f := filepath.Join(dir, "data", "big")
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(f)
	b[len(b)/2] ^= 1
	os.WriteFile(f, b, 0o600)
	os.Chtimes(f, st.ModTime(), st.ModTime())
	if _, err := Restore(context.Background(), Config{Filer: dst.GRPCAddr(), Path: "/tampered", Dest: dest, Key: key}); !errors.Is(err, ErrBadKey) {
		t.Errorf("restore of a changed file: %v, want ErrBadKey", err)
	}
}

// TestSealOpenSizes: the encrypted form of every size around the segment
// boundaries opens to the same bytes, plainSize inverts its size, and a
// file cut short at a segment boundary does not open.
func TestSealOpenSizes(t *testing.T) {
	key, _ := DeriveKey("size-test-secret-0123")
	for _, n := range []int{0, 1, encSegment - 1, encSegment, encSegment + 1, 2 * encSegment, 3*encSegment + 7} {
		plain := data(fmt.Sprint(n), n)
		sr, err := newSealReader(key, bytes.NewReader(plain))
		if err != nil {
			t.Fatal(err)
		}
		sealed, err := io.ReadAll(iotestOneByte{sr})
		if err != nil {
			t.Fatal(err)
		}
		if got := plainSize(int64(len(sealed))); got != int64(n) {
			t.Errorf("%d bytes: plainSize(%d) = %d", n, len(sealed), got)
		}
		or, err := newOpenReader(key, io.NopCloser(bytes.NewReader(sealed)))
		if err != nil {
			t.Fatal(err)
		}
		back, err := io.ReadAll(or)
		if err != nil || !bytes.Equal(back, plain) {
			t.Errorf("%d bytes: opened %d bytes, %v", n, len(back), err)
		}
		if n > encSegment {
			cut := sealed[:encHeader+encSegment+encTag]
			or, _ := newOpenReader(key, io.NopCloser(bytes.NewReader(cut)))
			if _, err := io.ReadAll(or); !errors.Is(err, ErrBadKey) {
				t.Errorf("%d bytes cut at a segment boundary: %v, want ErrBadKey", n, err)
			}
		}
	}
}

// iotestOneByte reads through r in small, odd steps.
type iotestOneByte struct{ r io.Reader }

func (o iotestOneByte) Read(p []byte) (int, error) { return o.r.Read(p[:min(len(p), 7777)]) }

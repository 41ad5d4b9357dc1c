package blackbox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/kelpfs/kelp/internal/testutil"
)

// encMarker starts every line of the test files: it must never show in the
// volume servers' files while --filer.encrypt-data is on.
const encMarker = "KELP-ENCRYPTION-AT-REST-PLAINTEXT"

// encContent is n bytes of numbered lines starting with the marker.
func encContent(tag string, n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%s %s line %09d\n", encMarker, tag, i)
	}
	return b.Bytes()[:n]
}

// volumeBytesHold reports whether any file under dir contains needle, and
// how many bytes the files hold in all.
func volumeBytesHold(t *testing.T, dir string, needle []byte) (bool, int64) {
	found, total := false, int64(0)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		total += int64(len(b))
		if bytes.Contains(b, needle) {
			t.Logf("%s holds %q", p, needle)
			found = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found, total
}

// stop ends the process with SIGTERM and waits for it.
func (p *process) stop() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			p.kill()
		}
	}
}

// TestEncryptDataAtRest: with --filer.encrypt-data, files written through the
// filer's HTTP API, S3 (AWS SDK) and WebDAV (fsview, which stores chunks
// itself) never show their plaintext in the volume servers' files, read back
// byte for byte (whole and ranges across 1 MiB chunk boundaries), and still
// read after a restart without the flag; a file written then is stored in
// the clear (the scan would see plaintext).
func TestEncryptDataAtRest(t *testing.T) {
	dir := t.TempDir()
	var ports serverPorts
	dav := testutil.FreePorts(t, 1)[0]
	args := []string{"--filer.chunk-size=1", "--webdav.port=" + strconv.Itoa(dav),
		"--s3.access-key=" + s3AccessKey, "--s3.secret-key=" + s3SecretKey}
	p := startServer(t, dir, &ports, append(args, "--filer.encrypt-data")...)
	filer := "http://" + hostport(ports.filer)
	davURL := "http://" + hostport(dav)
	ctx := context.Background()
	cl := s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String("http://" + hostport(ports.s3)), UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: s3AccessKey, SecretAccessKey: s3SecretKey}, nil
		}),
		HTTPClient: &http.Client{},
	})
	waitFor(t, "webdav", func() bool { r, err := http.Get(davURL + "/"); return err == nil && r.Body.Close() == nil })

	files := map[string][]byte{
		"filer/small.txt": encContent("filer-small", 300),
		"filer/large.bin": encContent("filer-large", 5<<20+12345),
		"s3/small.txt":    encContent("s3-small", 200),
		"s3/large.bin":    encContent("s3-large", 3<<20+777),
		"dav/small.txt":   encContent("dav-small", 100),
		"dav/large.bin":   encContent("dav-large", 2<<20+999),
	}
	// Writes.
	for _, name := range []string{"filer/small.txt", "filer/large.bin"} {
		if code, err := put(ctx, filer+"/enc/"+name, files[name]); err != nil || code != 201 {
			t.Fatalf("filer PUT %s: %d %v", name, code, err)
		}
	}
	if _, err := cl.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("enc")}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"s3/small.txt", "s3/large.bin"} {
		if _, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("enc"), Key: aws.String(name), Body: bytes.NewReader(files[name])}); err != nil {
			t.Fatalf("S3 put %s: %v", name, err)
		}
	}
	req, _ := http.NewRequest("MKCOL", davURL+"/dav", nil)
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != 201 {
		t.Fatalf("MKCOL: %v %v", r, err)
	}
	for _, name := range []string{"dav/small.txt", "dav/large.bin"} {
		if code, err := put(ctx, davURL+"/"+name, files[name]); err != nil || code/100 != 2 {
			t.Fatalf("WebDAV PUT %s: %d %v", name, code, err)
		}
	}

	checkAll := func(when string) {
		t.Helper()
		for name, want := range files {
			var url string
			switch filepath.Dir(name) {
			case "filer":
				url = filer + "/enc/" + name
			case "s3":
				url = "" // through the SDK below
			case "dav":
				url = davURL + "/" + name
			}
			ranges := [][2]int{{0, len(want)}, {len(want) - 1, 1}}
			if len(want) > 1<<20 {
				ranges = append(ranges, [2]int{1<<20 - 100, 200}, [2]int{1<<20 - 1, 1<<20 + 2}, [2]int{65530, 12})
			}
			for _, rg := range ranges {
				hdr := fmt.Sprintf("bytes=%d-%d", rg[0], rg[0]+rg[1]-1)
				var got []byte
				if url == "" {
					out, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("enc"), Key: aws.String(name), Range: aws.String(hdr)})
					if err != nil {
						t.Fatalf("%s: S3 GET %s %s: %v", when, name, hdr, err)
					}
					got, err = io.ReadAll(out.Body)
					out.Body.Close()
					if err != nil {
						t.Fatal(err)
					}
				} else {
					req, _ := http.NewRequest("GET", url, nil)
					req.Header.Set("Range", hdr)
					r, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					got, err = io.ReadAll(r.Body)
					r.Body.Close()
					if err != nil || r.StatusCode/100 != 2 {
						t.Fatalf("%s: GET %s %s: %s %v", when, url, hdr, r.Status, err)
					}
				}
				if !bytes.Equal(got, want[rg[0]:rg[0]+rg[1]]) {
					t.Fatalf("%s: %s %s: %d bytes differ from what was written", when, name, hdr, len(got))
				}
			}
		}
		// The S3 ETag stays the MD5 of the plaintext.
		h, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("enc"), Key: aws.String("s3/large.bin")})
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("%q", md5hex(files["s3/large.bin"])); aws.ToString(h.ETag) != want {
			t.Errorf("%s: ETag %s, want the plaintext MD5 %s", when, aws.ToString(h.ETag), want)
		}
	}
	checkAll("encrypted")
	p.stop()

	found, total := volumeBytesHold(t, filepath.Join(dir, "volumes"), []byte(encMarker))
	if found {
		t.Fatal("plaintext found in the volume servers' files with --filer.encrypt-data")
	}
	var size int64
	for _, b := range files {
		size += int64(len(b))
	}
	if total < size {
		t.Fatalf("the volume files hold %d bytes, less than the %d written: the scan saw no data", total, size)
	}

	// Restarted without the flag: everything still reads.
	p = startServer(t, dir, &ports, args...)
	waitFor(t, "webdav", func() bool { r, err := http.Get(davURL + "/"); return err == nil && r.Body.Close() == nil })
	checkAll("after a restart without --filer.encrypt-data")
	// Control: now a file is stored in the clear, and the scan sees it.
	if code, err := put(ctx, filer+"/enc/plain.txt", encContent("plain", 1000)); err != nil || code != 201 {
		t.Fatalf("filer PUT: %d %v", code, err)
	}
	p.stop()
	if found, _ := volumeBytesHold(t, filepath.Join(dir, "volumes"), []byte(encMarker+" plain")); !found {
		t.Fatal("a file written without --filer.encrypt-data is not found by the scan")
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s never became ready", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

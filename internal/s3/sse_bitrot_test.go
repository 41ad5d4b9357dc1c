package s3

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// TestSSEObjectWithAFlippedByteIsNeverServedWhole: the volume server skips
// its CRC pass for the ciphertext of an SSE object (the gateway's AES-GCM
// checks every byte: chunk.IsAuthenticated), so a byte changed on disk must
// still end the GET short or fail it, never give a complete body.
func TestSSEObjectWithAFlippedByteIsNeverServedWhole(t *testing.T) {
	e := startEnvChunks(t, 8<<20, nil)
	e.mkBucket("rot")
	data := randBytes(1 << 20)
	if resp, b := e.raw("PUT", "/rot/obj", data, map[string]string{"x-amz-server-side-encryption": "AES256"}); resp.StatusCode != 200 {
		t.Fatalf("PUT: %s %s", resp.Status, b)
	}
	get := func() (int, []byte, error) {
		req, _ := http.NewRequest("GET", e.gw.URL()+"/rot/obj", nil)
		req.Header.Set("x-amz-content-sha256", "UNSIGNED-PAYLOAD")
		if err := v4.NewSigner().SignHTTP(e.ctx, aws.Credentials{AccessKeyID: testAK, SecretAccessKey: testSK}, req,
			"UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}
	if code, b, err := get(); code != 200 || err != nil || !bytes.Equal(b, data) {
		t.Fatalf("GET before: %d, %d bytes, %v", code, len(b), err)
	}

	// The object's ciphertext fills most of the largest .dat file: flip a
	// byte in its middle.
	var dat string
	var size int64
	for _, dir := range e.cluster.Volume[0].Dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.dat"))
		for _, f := range files {
			if st, err := os.Stat(f); err == nil && st.Size() > size {
				dat, size = f, st.Size()
			}
		}
	}
	if size < 1<<20 {
		t.Fatalf("no .dat file holds the object (largest %q, %d bytes)", dat, size)
	}
	f, err := os.OpenFile(dat, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte{0}
	f.ReadAt(b, size/2)
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, size/2); err != nil {
		t.Fatal(err)
	}
	f.Close()

	code, got, err := get()
	if code == 200 && err == nil && len(got) == len(data) {
		t.Fatalf("a flipped byte was served as a whole body (equal to the original: %v)", bytes.Equal(got, data))
	}
	t.Logf("after the flip: status %d, %d of %d bytes, %v", code, len(got), len(data), err)
}

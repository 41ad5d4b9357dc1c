package s3

import (
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/security"
)

// cpuTime is the CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGetObject1MiB reads one 1 MiB object again and again, stored
// plain and with SSE-S3, through the gateway with a plain HTTP client:
// the ratio of the two is the cost of decryption on the GET path (the
// issue's target: SSE-S3 at least 0.8x the speed of a plain GET). The
// filer's chunks are 8 MiB, as in a default `kelp server`.
func BenchmarkGetObject1MiB(b *testing.B) {
	benchmarkGet1MiB(b, startEnvChunks(b, 8<<20, nil), &http.Client{})
}

// BenchmarkGetObject1MiBSecure is BenchmarkGetObject1MiB with TLS on
// every port (mutual TLS between the servers, as `kelp server --secure`)
// and the filer's chunks encrypted at rest: the client's TLS, the
// gateway's TLS to it and to the volume server, the volume server's TLS
// and the at-rest decryption are all in the process's CPU time.
func BenchmarkGetObject1MiBSecure(b *testing.B) {
	dir := b.TempDir()
	if _, err := security.CertsFor(dir, []string{"127.0.0.1"}); err != nil {
		b.Fatal(err)
	}
	tl, err := security.Load(security.Files{Cert: filepath.Join(dir, "127.0.0.1.crt"),
		Key: filepath.Join(dir, "127.0.0.1.key"), CA: filepath.Join(dir, "ca.crt")})
	if err != nil {
		b.Fatal(err)
	}
	security.SetProcess(tl)
	b.Cleanup(func() { security.SetProcess(nil) })
	e := startEnvFiler(b, 8<<20, func(c *filerserver.Config) { c.EncryptData = true }, nil)
	benchmarkGet1MiB(b, e, &http.Client{Transport: &http.Transport{TLSClientConfig: tl.ClientConfig()}})
}

func benchmarkGet1MiB(b *testing.B, e *env, client *http.Client) {
	signer := v4.NewSigner()
	creds := aws.Credentials{AccessKeyID: testAK, SecretAccessKey: testSK}
	do := func(method, path string, body []byte, hdr map[string]string) (*http.Response, error) {
		req, _ := http.NewRequest(method, e.gw.URL()+path, bytes.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		req.Header.Set("x-amz-content-sha256", "UNSIGNED-PAYLOAD")
		if err := signer.SignHTTP(e.ctx, creds, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
			return nil, err
		}
		return client.Do(req)
	}
	put := func(path string, body []byte, hdr map[string]string) {
		resp, err := do("PUT", path, body, hdr)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("PUT %s: %s", path, resp.Status)
		}
	}
	put("/bench", nil, nil)
	data := randBytes(1 << 20)
	for _, c := range []struct{ name, sse string }{{"plain", ""}, {"sse-s3", "AES256"}} {
		hdr := map[string]string{}
		if c.sse != "" {
			hdr["x-amz-server-side-encryption"] = c.sse
		}
		put("/bench/"+c.name, data, hdr)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			cpu0 := cpuTime()
			for b.Loop() {
				resp, err := do("GET", "/bench/"+c.name, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || n != int64(len(data)) || resp.StatusCode != 200 {
					b.Fatalf("GET %s: %s, %d bytes, %v", c.name, resp.Status, n, err)
				}
			}
			// The process's CPU time (client, gateway, filer and volume
			// servers are all in it) per GET: on a shared machine it varies
			// much less than the wall time.
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

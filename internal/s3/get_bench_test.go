package s3

import (
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
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
	e := startEnvChunks(b, 8<<20, nil)
	e.mkBucket("bench")
	data := randBytes(1 << 20)
	for _, c := range []struct{ name, sse string }{{"plain", ""}, {"sse-s3", "AES256"}} {
		hdr := map[string]string{}
		if c.sse != "" {
			hdr["x-amz-server-side-encryption"] = c.sse
		}
		if resp, _ := e.raw("PUT", "/bench/"+c.name, data, hdr); resp.StatusCode != 200 {
			b.Fatalf("PUT %s: %s", c.name, resp.Status)
		}
		b.Run(c.name, func(b *testing.B) {
			client := &http.Client{}
			signer := v4.NewSigner()
			creds := aws.Credentials{AccessKeyID: testAK, SecretAccessKey: testSK}
			b.SetBytes(int64(len(data)))
			cpu0 := cpuTime()
			for b.Loop() {
				req, _ := http.NewRequest("GET", e.gw.URL()+"/bench/"+c.name, nil)
				req.Header.Set("x-amz-content-sha256", "UNSIGNED-PAYLOAD")
				if err := signer.SignHTTP(e.ctx, creds, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
					b.Fatal(err)
				}
				resp, err := client.Do(req)
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

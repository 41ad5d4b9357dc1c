package filerserver

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/testcluster"
)

// BenchmarkHTTP64KiB uploads then downloads files of 64 KiB through the
// filer's HTTP API with 16 concurrent clients, on an in-process cluster
// wired as `kelp server` runs: fsync on, the embedded store, the volume
// server reached in process. b.N files per phase; run with
// -benchtime=1000x for the figure.
func BenchmarkHTTP64KiB(b *testing.B) {
	c := testcluster.Start(b, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}, Fsync: true})
	s := startOn(b, c, Config{HTTPClient: c.InProcessHTTPClient()})
	base := "http://" + s.Addr()
	hc := client.NewHTTPClient()
	data := make([]byte, 64<<10)
	rand.Read(data)
	const workers = 16
	run := func(b *testing.B, n int, one func(i int) error) {
		var next atomic.Int64
		var wg sync.WaitGroup
		var failed atomic.Value
		start := time.Now()
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= n {
						return
					}
					if err := one(i); err != nil {
						failed.Store(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "files/s")
	}
	n := 0
	b.Run("upload", func(b *testing.B) {
		n = max(n, b.N)
		run(b, b.N, func(i int) error {
			req, _ := http.NewRequest("PUT", fmt.Sprintf("%s/bench/d%d/f%d", base, i%32, i), bytes.NewReader(data))
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 201 {
				return fmt.Errorf("PUT: %d", resp.StatusCode)
			}
			return nil
		})
	})
	// The same bytes as a multipart/form-data POST to a directory (what
	// `curl -F file=@x http://filer/dir/` sends): compare its files/s with
	// upload's, on the same server.
	b.Run("upload-multipart", func(b *testing.B) {
		run(b, b.N, func(i int) error {
			body, ctype := multipartBody(fmt.Sprintf("m%d", i), data)
			req, _ := http.NewRequest("POST", fmt.Sprintf("%s/bench/m%d/", base, i%32), bytes.NewReader(body))
			req.Header.Set("Content-Type", ctype)
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 201 {
				return fmt.Errorf("POST multipart: %d", resp.StatusCode)
			}
			return nil
		})
	})
	b.Run("download", func(b *testing.B) {
		run(b, b.N, func(i int) error {
			resp, err := hc.Get(fmt.Sprintf("%s/bench/d%d/f%d", base, (i%n)%32, i%n))
			if err != nil {
				return err
			}
			k, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || k != int64(len(data)) {
				return fmt.Errorf("GET: %d, %d bytes", resp.StatusCode, k)
			}
			return nil
		})
	})
}

// multipartBody is a form with one file part named name holding data, as
// curl -F file=@name sends it.
func multipartBody(name string, data []byte) ([]byte, string) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", name)
	fw.Write(data)
	mw.Close()
	return buf.Bytes(), mw.FormDataContentType()
}

package volumeserver

import (
	"bytes"
	"io"
	"net"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/fid"
)

// BenchmarkFastWrite1KiB uploads 1 KiB needles (new keys, no fsync: the
// test server's volumes do not sync) over loopback TCP on kept-alive
// connections, through the fast write path ("fast") and through net/http
// alone ("nethttp", the same handler behind a plain http.Server), and
// reports the process's CPU time per upload (cpu-us/op, getrusage): client
// and server, the client the same minimal one for both.
func BenchmarkFastWrite1KiB(b *testing.B) {
	d := startDiffServer(b)
	body := bytes.Repeat([]byte("w"), 1024)
	var key atomic.Uint64
	key.Store(1 << 20)
	const head = " HTTP/1.1\r\nHost: kelp.test\r\nContent-Type: application/octet-stream\r\nContent-Length: 1024\r\n\r\n"
	// Every answer has the same length (the same body: the same ETag).
	first := "PUT /" + fid.FileID{Volume: 1, Key: key.Add(1), Cookie: 0x5eed}.String() + head + string(body)
	answer := raw(b, d.addr, first)
	if !bytes.HasPrefix(answer, []byte("HTTP/1.1 201 ")) {
		b.Fatalf("answer %q", answer)
	}
	for _, bc := range []struct{ name, addr string }{{"fast", d.addr}, {"nethttp", d.ref}} {
		for _, conns := range []int{1, 16} {
			b.Run(bc.name+"/conns="+strconv.Itoa(conns), func(b *testing.B) {
				b.SetParallelism(max(1, conns/max(1, runtime.GOMAXPROCS(0))))
				w0 := d.s.fast.wrote.Load()
				cpu0 := cpuTime()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					c, err := net.Dial("tcp", bc.addr)
					if err != nil {
						b.Error(err)
						return
					}
					defer c.Close()
					buf := make([]byte, len(answer))
					var req []byte
					for pb.Next() {
						// Keys of the same length: the same request length.
						path := "/" + fid.FileID{Volume: 1, Key: key.Add(1), Cookie: 0x5eed}.String()
						req = append(append(append(req[:0], "PUT "...), path...), head...)
						req = append(req, body...)
						if _, err := c.Write(req); err != nil {
							b.Error(err)
							return
						}
						if _, err := io.ReadFull(c, buf); err != nil {
							b.Error(err)
							return
						}
						if !bytes.HasPrefix(buf, []byte("HTTP/1.1 201 ")) {
							b.Errorf("answer %q", buf)
							return
						}
					}
				})
				b.StopTimer()
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
				if bc.name == "fast" && d.s.fast.wrote.Load()-w0 < int64(b.N) {
					b.Fatalf("the fast path answered %d of %d", d.s.fast.wrote.Load()-w0, b.N)
				}
			})
		}
	}
}

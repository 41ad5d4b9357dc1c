package volumeserver

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/fid"
)

// BenchmarkFastRead1KiB reads a 1 KiB needle over loopback TCP, on kept-
// alive connections, from the fast read path ("fast") and from net/http
// alone ("nethttp", the same handler behind a plain http.Server), and
// reports the process's CPU time per read (cpu-us/op, from getrusage).
// The client is the same minimal one for both (write the request, read the
// answer's known length), so the difference is the server's. "floor" is a
// server that writes a canned answer for every request it reads: the
// syscalls and loopback cost no server can go below.
func BenchmarkFastRead1KiB(b *testing.B) {
	d := startDiffServer(b)
	path := "/" + fid.FileID{Volume: 1, Key: 1000, Cookie: 0xbe9c}.String()
	w := httptest.NewRecorder()
	d.s.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodPut, path, bytes.NewReader(make([]byte, 1024))))
	if w.Code != http.StatusCreated {
		b.Fatalf("PUT: %d %s", w.Code, w.Body)
	}
	req := []byte("GET " + path + " HTTP/1.1\r\nHost: kelp.test\r\nUser-Agent: bench\r\nAccept-Encoding: gzip\r\n\r\n")
	answer := raw(b, d.addr, string(req))
	floor := startCanned(b, len(req), answer)
	for _, bc := range []struct{ name, addr string }{{"fast", d.addr}, {"nethttp", d.ref}, {"floor", floor}} {
		for _, conns := range []int{1, 16} {
			b.Run(bc.name+"/conns="+strconv.Itoa(conns), func(b *testing.B) {
				b.SetParallelism(max(1, conns/max(1, runtime.GOMAXPROCS(0))))
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
					for pb.Next() {
						if _, err := c.Write(req); err != nil {
							b.Error(err)
							return
						}
						if _, err := io.ReadFull(c, buf); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
			})
		}
	}
}

// startCanned serves answer for every reqLen bytes read.
func startCanned(b *testing.B, reqLen int, answer []byte) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReaderSize(c, 4096)
				buf := make([]byte, reqLen)
				for {
					if _, err := io.ReadFull(br, buf); err != nil {
						return
					}
					if _, err := c.Write(answer); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFastReadParse is the fast path's parsing of a typical head
// (what kelp's client sends): peekHead's byte scan and parseFastGet.
func BenchmarkFastReadParse(b *testing.B) {
	req := []byte("GET /3,01637037d6 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: Go-http-client/1.1\r\nAccept-Encoding: gzip\r\n\r\n")
	r := bytes.NewReader(req)
	br := bufio.NewReaderSize(r, fastReadBuf)
	for b.Loop() {
		r.Reset(req)
		br.Reset(r)
		head, err := peekHead(br, func() {})
		if err != nil {
			b.Fatal(err)
		}
		if _, _, ok := parseFastGet(head); !ok {
			b.Fatal("not fast")
		}
	}
}

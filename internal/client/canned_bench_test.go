package client_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/textproto"
	"strconv"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/fid"
)

// cannedServer answers every HTTP/1.1 request with a fixed response, doing
// as little work as possible, so that benchmarks against it measure the
// client's own cost.
func cannedServer(b *testing.B, status int, body string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	resp := []byte("HTTP/1.1 " + strconv.Itoa(status) + " X\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := textproto.NewReader(bufio.NewReader(conn))
				for {
					if _, err := r.ReadLine(); err != nil {
						return
					}
					h, err := r.ReadMIMEHeader()
					if err != nil {
						return
					}
					if n, _ := strconv.Atoi(h.Get("Content-Length")); n > 0 {
						if _, err := io.CopyN(io.Discard, r.R, int64(n)); err != nil {
							return
						}
					}
					if _, err := conn.Write(resp); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// BenchmarkClientAssignUpload measures the client alone: an assign and a
// 1 KiB upload against canned answers.
func BenchmarkClientAssignUpload(b *testing.B) {
	vol := cannedServer(b, 201, `{"name":"","size":1024,"eTag":"deadbeef"}`)
	master := cannedServer(b, 200, `{"fid":"3,01637037d6","url":"`+vol+`","publicUrl":"`+vol+`","count":1}`)
	c, err := client.New(client.Config{Masters: []string{master}})
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 1024)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			a, err := c.Assign(ctx, client.AssignRequest{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Upload(ctx, a.URL, a.FID, strings.NewReader(string(data)), 1024, client.UploadOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkClientGet measures the client alone: a cached lookup and a 1 KiB read.
func BenchmarkClientGet(b *testing.B) {
	vol := cannedServer(b, 200, strings.Repeat("x", 1024))
	master := cannedServer(b, 200, `{"volumeId":"3","locations":[{"url":"`+vol+`","publicUrl":"`+vol+`"}]}`)
	c, err := client.New(client.Config{Masters: []string{master}})
	if err != nil {
		b.Fatal(err)
	}
	id := fid.FileID{Volume: 3, Key: 1, Cookie: 0x637037d6}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 2048)
		for pb.Next() {
			rc, _, err := c.Get(ctx, id, nil)
			if err != nil {
				b.Fatal(err)
			}
			if n, _ := io.ReadFull(rc, buf); n != 1024 {
				b.Fatalf("read %d", n)
			}
			rc.Close()
		}
	})
}

package client_test

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/client/clienttest"
	"github.com/kelpfs/kelp/internal/fid"
)

// These measure the client and the fake servers together (both in this
// process); allocs/op is the figure to watch for the client's own cost.

func BenchmarkAssignUpload(b *testing.B) {
	cl := clienttest.NewCluster(b, clienttest.Options{Servers: 2})
	c := newBenchClient(b, cl)
	data := make([]byte, 1024)
	ctx := context.Background()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := bytes.NewReader(nil)
		for pb.Next() {
			a, err := c.Assign(ctx, client.AssignRequest{})
			if err != nil {
				b.Fatal(err)
			}
			r.Reset(data)
			if _, err := c.Upload(ctx, a.URL, a.FID, r, int64(len(data)), client.UploadOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkGet(b *testing.B) {
	cl := clienttest.NewCluster(b, clienttest.Options{Servers: 2})
	c := newBenchClient(b, cl)
	ctx := context.Background()
	data := make([]byte, 1024)
	ids := make([]fid.FileID, 256)
	for i := range ids {
		id, _, err := c.PutBytes(ctx, client.AssignRequest{}, data, client.UploadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = id
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 2048)
		i := 0
		for pb.Next() {
			rc, _, err := c.Get(ctx, ids[i%len(ids)], nil)
			if err != nil {
				b.Fatal(err)
			}
			if n, _ := io.ReadFull(rc, buf); n != len(data) {
				b.Fatalf("read %d bytes", n)
			}
			rc.Close()
			i++
		}
	})
}

func newBenchClient(b *testing.B, cl *clienttest.Cluster) *client.Client {
	c, err := client.New(client.Config{Masters: []string{cl.Master.URL}})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

package testcluster_test

import (
	"context"
	"io"
	"testing"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/testcluster"
)

// BenchmarkPut1KiB is one assign and one upload of 1 KiB per op, client and
// servers in one process with fsync on: allocs/op and ns/op of the whole path.
func BenchmarkPut1KiB(b *testing.B) { benchmarkPut1KiB(b, nil) }

// BenchmarkPut1KiBSigned is BenchmarkPut1KiB with signed file ids: the
// master signs each assign's token, the volume server checks it.
func BenchmarkPut1KiBSigned(b *testing.B) {
	benchmarkPut1KiB(b, auth.NewSigner("bench-signing-key", 0))
}

func benchmarkPut1KiB(b *testing.B, signer *auth.Signer) {
	c := testcluster.Start(b, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}, Fsync: true, Signer: signer})
	cl, _ := client.New(client.Config{Masters: c.MasterAddrs()})
	data := make([]byte, 1024)
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := cl.PutBytes(context.Background(), client.AssignRequest{}, data, client.UploadOptions{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkGet1KiB reads 1 KiB needles through the client (cached lookup + GET).
func BenchmarkGet1KiB(b *testing.B) {
	c := testcluster.Start(b, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}})
	cl, _ := client.New(client.Config{Masters: c.MasterAddrs()})
	ids := make([]fid.FileID, 256)
	for i := range ids {
		id, _, err := cl.PutBytes(context.Background(), client.AssignRequest{}, make([]byte, 1024), client.UploadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = id
	}
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			rc, _, err := cl.Get(context.Background(), ids[i%len(ids)], nil)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, rc)
			rc.Close()
			i++
		}
	})
}

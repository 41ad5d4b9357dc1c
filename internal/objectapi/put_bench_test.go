package objectapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
)

// BenchmarkPutGet4KiB: one 4 KiB PUT and one GET through the object layer
// over an in-memory blob store and Pebble without sync: the layer's own
// cost per small object (the checks and attributes of each request).
func BenchmarkPutGet4KiB(b *testing.B) {
	ctx := context.Background()
	l, _ := newLostAckLayer(b)
	body := bytes.Repeat([]byte("x"), 4096)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		key := fmt.Sprintf("k%d", i%1000)
		if _, err := l.PutObject(ctx, "bkt", key, bytes.NewReader(body), PutOptions{Size: int64(len(body))}); err != nil {
			b.Fatal(err)
		}
		o, err := l.GetObject(ctx, "bkt", key, GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, o.Body)
		o.Body.Close()
	}
}

package fsview

import (
	"context"
	"fmt"
	"io"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/fid"
)

// clusterBlobs stores and reads chunks on the volume servers directly,
// through the cluster client (assign, upload with retries elsewhere,
// lookups with fail-over between replicas). The filer only sees the
// finished chunk lists, so file data never passes through it.
type clusterBlobs struct {
	c   *client.Client
	req client.AssignRequest
}

var _ chunk.Putter = (*clusterBlobs)(nil)
var _ chunk.Opener = (*clusterBlobs)(nil)

func (b *clusterBlobs) Put(ctx context.Context, data []byte) (string, error) {
	id, _, err := b.c.PutBytes(ctx, b.req, data, client.UploadOptions{UnhurriedSync: unhurriedUpload(ctx)})
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

func (b *clusterBlobs) Open(ctx context.Context, s string, off, n int64) (io.ReadCloser, error) {
	id, err := fid.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("fsview: chunk %q: %w", s, err)
	}
	if n == 0 {
		return io.NopCloser(eof{}), nil
	}
	var rng *client.Range
	if off > 0 || n > 0 {
		rng = &client.Range{Offset: off, Length: max(n, 0)}
	}
	body, _, err := b.c.Get(ctx, id, rng)
	return body, err
}

type unhurriedKey struct{}

// withUnhurriedUpload marks the uploads of a chunk nobody waits for: the
// volume server may then hold its fsync up to 10 ms for other writes to
// share (client.UploadOptions.UnhurriedSync).
func withUnhurriedUpload(ctx context.Context) context.Context {
	return context.WithValue(ctx, unhurriedKey{}, true)
}

func unhurriedUpload(ctx context.Context) bool {
	v, _ := ctx.Value(unhurriedKey{}).(bool)
	return v
}

type eof struct{}

func (eof) Read([]byte) (int, error) { return 0, io.EOF }

package filerserver

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/fid"
)

// clusterBlobs is chunk.Blobs over the cluster client: Put assigns and
// uploads (retrying elsewhere on failure), Open reads a range with
// fail-over between replicas, Delete removes a needle.
type clusterBlobs struct {
	c   *client.Client
	req client.AssignRequest
}

var _ chunk.Blobs = (*clusterBlobs)(nil)

// Put stores a chunk where the request asked (withChunkLayout), else
// where the filer's configuration says.
func (b *clusterBlobs) Put(ctx context.Context, data []byte) (string, error) {
	req := b.req
	if l, ok := chunkLayoutFrom(ctx); ok {
		if l.Collection != "" {
			req.Collection = l.Collection
		}
		if l.Replication != "" {
			req.Replication = l.Replication
		}
	}
	id, _, err := b.c.PutBytes(ctx, req, data, client.UploadOptions{})
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

func (b *clusterBlobs) Open(ctx context.Context, s string, off, n int64) (io.ReadCloser, error) {
	id, err := fid.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("filerserver: chunk %q: %w", s, err)
	}
	var rng *client.Range
	if off > 0 || n >= 0 {
		if n == 0 {
			return io.NopCloser(eofReader{}), nil
		}
		rng = &client.Range{Offset: off, Length: max(n, 0)}
	}
	body, _, err := b.c.Get(ctx, id, rng)
	if err != nil {
		return nil, notFound(err)
	}
	return body, nil
}

func (b *clusterBlobs) Delete(ctx context.Context, s string) error {
	id, err := fid.Parse(s)
	if err != nil {
		// A malformed id can never be deleted: drop it from the queue.
		return fmt.Errorf("filerserver: chunk %q: %w: %w", s, chunk.ErrNotFound, err)
	}
	return notFound(b.c.Delete(ctx, id))
}

// notFound adds chunk.ErrNotFound to the client's not-found errors, so the
// filer's garbage collector treats the blob as gone.
func notFound(err error) error {
	if errors.Is(err, client.ErrNotFound) {
		return fmt.Errorf("%w: %w", chunk.ErrNotFound, err)
	}
	return err
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/kelpfs/kelp/internal/fid"
)

// Put stores size bytes read from body under a new file id: assign, then
// upload. When the upload fails in a way another volume could fix (volume
// full or read-only, 5xx, connection error, volume gone), it starts over
// with a NEW assignment, at most Config.MaxRetries more times, with a short
// growing pause. Assign itself waits through an election or a master with
// no writable volume yet, for Config.MasterWait in all (see masterGetUntil),
// and its failure after that wait ends Put. A file id whose
// upload failed is never reused: the failed server may have written part of
// it. body is read from offset 0 on every attempt, which is why it is an
// io.ReaderAt.
func (c *Client) Put(ctx context.Context, req AssignRequest, body io.ReaderAt, size int64, opts UploadOptions) (fid.FileID, UploadResult, error) {
	if size < 0 {
		return fid.FileID{}, UploadResult{}, fmt.Errorf("client: put: negative size %d", size)
	}
	return c.put(ctx, req, func() io.Reader { return io.NewSectionReader(body, 0, size) }, size, opts)
}

// PutBytes is Put for data in memory.
func (c *Client) PutBytes(ctx context.Context, req AssignRequest, data []byte, opts UploadOptions) (fid.FileID, UploadResult, error) {
	// A *bytes.Reader, unlike a SectionReader, lets net/http send the
	// headers and a small body in one write.
	return c.put(ctx, req, func() io.Reader { return bytes.NewReader(data) }, int64(len(data)), opts)
}

// put is Put with reopen returning a fresh reader of the body per attempt.
func (c *Client) put(ctx context.Context, req AssignRequest, reopen func() io.Reader, size int64, opts UploadOptions) (fid.FileID, UploadResult, error) {
	var lastErr error
	until := time.Now().Add(c.masterWait)
	attempts := c.maxRetries + 1
	for attempt := 0; attempt < attempts; attempt++ {
		if attempt > 0 {
			if err := sleepCtx(ctx, backoff(attempt)); err != nil {
				return fid.FileID{}, UploadResult{}, fmt.Errorf("client: put: %w (last error: %w)", err, lastErr)
			}
		}
		a, err := c.assignOne(ctx, until, req)
		if err != nil {
			return fid.FileID{}, UploadResult{}, fmt.Errorf("client: put: %w", err)
		}
		opts.Auth = a.Auth
		res, err := c.upload(ctx, a.URL, a.FID, reopen(), reopen, size, opts)
		if err == nil {
			return a.FID, res, nil
		}
		c.keys.drop(req, a.FID.Volume)
		lastErr = fmt.Errorf("client: put %s on %s: %w", a.FID, a.URL, err)
		// A 401 is retried once with a fresh assignment: a reserved key
		// block's token may have expired (tokens shorter than blocks).
		if !retryable(ctx, err) && !(attempt == 0 && isStatus(err, http.StatusUnauthorized)) {
			return fid.FileID{}, UploadResult{}, lastErr
		}
		c.log.Debug("client: upload failed, retrying with a new assignment", "attempt", attempt+1, "fid", a.FID.String(), "err", err)
	}
	return fid.FileID{}, UploadResult{}, fmt.Errorf("client: put gave up after %d attempts: %w", attempts, lastErr)
}

// backoff is the pause before retry n (n >= 1): 10ms doubling to 640ms, with
// up to 50% jitter so clients that failed together do not retry together.
func backoff(n int) time.Duration {
	d := 10 * time.Millisecond << min(n-1, 6)
	return d + rand.N(d/2+1)
}

// isStatus reports whether err is a volume server's answer with status code.
func isStatus(err error, code int) bool {
	var he *HTTPError
	return errors.As(err, &he) && he.Status == code
}

package client

import (
	"context"
	"io"
	"mime"
	"path/filepath"
	"time"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/fid"
)

// getLocal reads needle id from the volume server at server through its
// Unix socket when that server runs on this host (Config.LocalReads): the
// server sends its volume file's descriptor and the bytes are read from the
// file directly, not copied through loopback HTTP. Any error, a server on
// another host included, means: read over HTTP.
func (c *Client) getLocal(ctx context.Context, server string, id fid.FileID, rng *Range) (io.ReadCloser, ObjectInfo, error) {
	off, n := int64(0), int64(-1)
	if rng != nil {
		off = rng.Offset
		if rng.Length > 0 {
			n = rng.Length
		}
	}
	// A sealed chunk's reader authenticates every byte itself; the CRC
	// pass would only cost CPU (as HeaderReaderAuthenticates tells HTTP).
	body, h, err := c.local.Open(serverKey(server), id.String(), off, n, !chunk.IsAuthenticated(ctx))
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	size := h.Size - off
	if n >= 0 {
		size = min(size, n)
	}
	info := ObjectInfo{
		Size:         size,
		TotalSize:    h.Size,
		ContentType:  contentType(h.Mime, h.Name),
		ETag:         h.ETag,
		LastModified: time.Unix(h.ModTime, 0),
		Name:         h.Name,
		Partial:      rng != nil,
	}
	return body, info, nil
}

// localCopy is the URL of a healthy location among locs (copies of one
// volume) that answers local reads on this host, or "" (Config.LocalReads
// off, one copy only, none local): a read tries it first.
func (c *Client) localCopy(locs []Location) string {
	if c.local == nil || len(locs) < 2 {
		return ""
	}
	for _, l := range locs {
		if !c.health.suspect(l.URL) && c.local.Serves(serverKey(l.URL)) {
			return l.URL
		}
	}
	return ""
}

// contentType is the type the volume server's HTTP answer would give.
func contentType(mimeType, name string) string {
	if mimeType != "" {
		return mimeType
	}
	if t := mime.TypeByExtension(filepath.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// Close releases the connections of local reads. The client stays usable.
func (c *Client) Close() {
	if c.local != nil {
		c.local.Close()
	}
}

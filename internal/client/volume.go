package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/security"
)

// UploadOptions describe the stored file.
type UploadOptions struct {
	// Name is stored with the needle. Setting it sends the body as
	// multipart/form-data (the API's only way to carry a file name), framed
	// around the body without copying it; leave it empty for the cheaper raw
	// upload.
	Name string
	// MimeType is stored and served back as Content-Type; empty means
	// application/octet-stream.
	MimeType string
	// Auth is the file token of the assignment (Assignment.Auth); Put sets
	// it. Empty: the client's Signer signs one, if it has one.
	Auth string
	// UnhurriedSync lets the volume server wait up to 10 ms before the
	// fsync that the answer waits for, so that other writes share it
	// (`?sync=unhurried`, docs/volume-server.md). The answer still comes
	// only once the needle is durable: for uploads nobody is waiting for.
	UnhurriedSync bool
}

// UploadResult is the volume server's answer to a write.
type UploadResult struct {
	Name string
	Size int64
	ETag string
}

// Range selects bytes of a needle: Length bytes from Offset; Length <= 0
// means to the end.
type Range struct {
	Offset int64
	Length int64
}

// ObjectInfo describes what Get returned.
type ObjectInfo struct {
	Size         int64 // bytes in the returned body; -1 if the server did not say
	TotalSize    int64 // size of the whole needle when known (== Size for a full read)
	ContentType  string
	ETag         string // without quotes
	Name         string // from Content-Disposition, when the server sends one
	LastModified time.Time
	Partial      bool // the server answered 206 to a Range
}

// volumeURL builds the URL of a needle on a volume server given as
// "host:port" or with a scheme.
func volumeURL(server string, id fid.FileID) string {
	if strings.HasPrefix(server, "http://") || strings.HasPrefix(server, "https://") {
		return strings.TrimRight(server, "/") + "/" + id.String()
	}
	return security.URL(server) + "/" + id.String()
}

// Upload writes body (size bytes; -1 if unknown, which costs a chunked
// upload) as needle id on the volume server at url ("host:port"). It makes
// one attempt; Put is the retrying form. An answer other than 2xx is a
// *HTTPError; a 507 or 5xx means this assignment is unusable.
// If body is an io.Closer it is always closed, as net/http does, perhaps
// after Upload returns: a caller that reuses body's buffer must wait for
// that Close.
func (c *Client) Upload(ctx context.Context, url string, id fid.FileID, body io.Reader, size int64, opts UploadOptions) (UploadResult, error) {
	return c.upload(ctx, url, id, body, nil, size, opts)
}

// upload is Upload with an optional reopen, which returns a fresh reader of
// the same bytes; it lets the transport resend the body when a kept-alive
// connection turns out to be closed.
func (c *Client) upload(ctx context.Context, server string, id fid.FileID, body io.Reader, reopen func() io.Reader,
	size int64, opts UploadOptions) (UploadResult, error) {
	ctype := opts.MimeType
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	// Like http.Client.Do, Upload always closes a body that is an io.Closer,
	// possibly after returning: callers reusing a buffer wait for Close.
	closer, _ := body.(io.Closer)
	if size == 0 {
		// A zero-length body with a non-nil reader would go out chunked.
		if closer != nil {
			closer.Close()
		}
		body, reopen, closer = nil, nil, nil
	}
	if opts.Name != "" {
		var err error
		body, reopen, size, ctype, err = multipartFrame(opts.Name, ctype, body, reopen, size)
		if err != nil {
			if closer != nil {
				closer.Close()
			}
			return UploadResult{}, err
		}
		if closer != nil {
			body = struct {
				io.Reader
				io.Closer
			}{body, closer}
		}
	}
	if br, ok := body.(*bytes.Reader); ok && reopen == nil {
		// The transport may resend it (GetBody below), as
		// http.NewRequest would let it for a *bytes.Reader.
		from := *br
		reopen = func() io.Reader { r := from; return &r }
	}
	target := volumeURL(server, id)
	if opts.UnhurriedSync {
		target += "?sync=unhurried"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, target, requestBody(body))
	if err != nil {
		if closer != nil {
			closer.Close()
		}
		return UploadResult{}, fmt.Errorf("client: upload request: %w", err)
	}
	req.Header["Content-Type"] = []string{ctype}
	if tok := opts.Auth; tok != "" || c.signer != nil {
		if tok == "" {
			tok = c.signer.Sign(id, 1)
		}
		req.Header["Authorization"] = []string{"Bearer " + tok}
	}
	// Writing the same bytes under the same file id twice stores the same
	// needle, so the transport may resend an upload that met a kept-alive
	// connection the server had just closed. A nil value marks the request
	// idempotent without sending the header.
	req.Header["Idempotency-Key"] = nil
	switch {
	case body == nil:
		req.ContentLength = 0
	case size > 0:
		req.ContentLength = size
	default:
		req.ContentLength = -1
	}
	if reopen != nil {
		req.GetBody = func() (io.ReadCloser, error) { return requestBody(reopen()), nil }
	}
	resp, err := c.doVolume(req, 0)
	if err != nil {
		return UploadResult{}, fmt.Errorf("client: upload %s: %w", target, err)
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		he, _ := c.httpError(resp)
		return UploadResult{}, he
	}
	etagHeader := resp.Header.Get("Etag")
	b, err := c.readAnswer(resp)
	if err != nil {
		return UploadResult{}, err
	}
	defer c.putBuf(b)
	var ans uploadAnswer
	if b.Len() > 0 {
		if err := decodeUploadAnswer(b.Bytes(), &ans); err != nil {
			return UploadResult{}, fmt.Errorf("client: upload %s: bad answer: %w", target, err)
		}
	}
	if ans.ETag == "" {
		ans.ETag = strings.Trim(etagHeader, `"`)
	}
	return UploadResult{Name: ans.Name, Size: ans.Size, ETag: ans.ETag}, nil
}

// ParseUploadAnswer decodes a volume server's 2xx answer to an upload.
func ParseUploadAnswer(body []byte) (UploadResult, error) {
	var ans uploadAnswer
	if err := decodeUploadAnswer(body, &ans); err != nil {
		return UploadResult{}, fmt.Errorf("client: bad upload answer: %w", err)
	}
	return UploadResult{Name: ans.Name, Size: ans.Size, ETag: ans.ETag}, nil
}

// multipartFrame wraps body in a one-part multipart/form-data message. The
// framing is built once and the body streamed between it, so the file is
// never copied and the total length stays known.
func multipartFrame(name, ctype string, body io.Reader, reopen func() io.Reader, size int64) (
	io.Reader, func() io.Reader, int64, string, error) {
	if body == nil { // an empty file still gets its framing
		body, reopen = http.NoBody, func() io.Reader { return http.NoBody }
	}
	var frame bytes.Buffer
	mw := multipart.NewWriter(&frame)
	h := make(textproto.MIMEHeader, 2)
	h.Set("Content-Disposition", `form-data; name="file"; filename="`+quoteEscaper.Replace(name)+`"`)
	h.Set("Content-Type", ctype)
	if _, err := mw.CreatePart(h); err != nil {
		return nil, nil, 0, "", fmt.Errorf("client: multipart framing: %w", err)
	}
	head := bytes.Clone(frame.Bytes())
	frame.Reset()
	if err := mw.Close(); err != nil {
		return nil, nil, 0, "", fmt.Errorf("client: multipart framing: %w", err)
	}
	tail := bytes.Clone(frame.Bytes()) // Close wrote "\r\n--boundary--\r\n"
	wrap := func(r io.Reader) io.Reader {
		return io.MultiReader(bytes.NewReader(head), r, bytes.NewReader(tail))
	}
	var rewrap func() io.Reader
	if reopen != nil {
		rewrap = func() io.Reader { return wrap(reopen()) }
	}
	if size >= 0 {
		size += int64(len(head) + len(tail))
	}
	return wrap(body), rewrap, size, mw.FormDataContentType(), nil
}

var quoteEscaper = strings.NewReplacer("\\", "\\\\", `"`, "\\\"", "\r", "", "\n", "")

// HeaderReaderAuthenticates on a read asks the volume server to skip its
// CRC pass over a whole needle: the reader checks every byte itself
// (chunk.IsAuthenticated; Get sends it when ctx says so).
const HeaderReaderAuthenticates = "X-Kelp-Reader-Authenticates"

// Get reads needle id, or the part rng selects (nil: all of it). It looks the
// volume up (cached) and tries its locations in order until one answers; when
// all fail it drops the cached locations and, if they were cached, tries any
// new ones the master gives. The caller must close the returned body.
// A missing needle is ErrNotFound.
func (c *Client) Get(ctx context.Context, id fid.FileID, rng *Range) (io.ReadCloser, ObjectInfo, error) {
	var body io.ReadCloser
	var info ObjectInfo
	err := c.onLocationsPrefer(ctx, id.Volume, id.Key, func(loc Location, more bool) error {
		if c.local != nil {
			if b, i, err := c.getLocal(ctx, loc.URL, id, rng); err == nil {
				body, info = b, i
				return nil
			}
		}
		// With another replica to try, a silent one is given up on sooner.
		within := time.Duration(0)
		if more {
			within = c.failoverAfter
		}
		r, err := c.get(ctx, loc.URL, id, rng, within)
		if err != nil {
			return err
		}
		if r.Header.Get(HeaderEC) != "" {
			c.noteEC(id.Volume, loc)
		}
		body, info = r.Body, objectInfo(r)
		return nil
	})
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	return body, info, nil
}

func (c *Client) get(ctx context.Context, server string, id fid.FileID, rng *Range, within time.Duration) (*http.Response, error) {
	target := volumeURL(server, id)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, fmt.Errorf("client: get request: %w", err)
	}
	if rng != nil {
		v := "bytes=" + strconv.FormatInt(rng.Offset, 10) + "-"
		if rng.Length > 0 {
			v += strconv.FormatInt(rng.Offset+rng.Length-1, 10)
		}
		req.Header["Range"] = []string{v}
	}
	if c.readSigner != nil {
		req.Header["Authorization"] = []string{"Bearer " + c.readSigner.Sign(id, 1)}
	}
	if chunk.IsAuthenticated(ctx) {
		req.Header[HeaderReaderAuthenticates] = []string{"1"}
	}
	resp, err := c.doVolume(req, within)
	if err != nil {
		return nil, fmt.Errorf("client: get %s: %w", target, err)
	}
	if resp.StatusCode == http.StatusUnauthorized && c.readSigner == nil && c.accessToken != nil {
		// The cluster signs reads and this client holds no read key: ask
		// a master for a read token of this file id, then read again.
		drainClose(resp.Body)
		tok, err := c.readToken(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("client: get %s: %w", target, err)
		}
		req2 := req.Clone(ctx)
		req2.Header["Authorization"] = []string{"Bearer " + tok}
		if resp, err = c.doVolume(req2, within); err != nil {
			return nil, fmt.Errorf("client: get %s: %w", target, err)
		}
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusPartialContent {
		he, _ := c.httpError(resp)
		return nil, he
	}
	return resp, nil
}

func objectInfo(resp *http.Response) ObjectInfo {
	h := resp.Header
	info := ObjectInfo{
		Size:        resp.ContentLength,
		TotalSize:   resp.ContentLength,
		ContentType: h.Get("Content-Type"),
		ETag:        strings.Trim(h.Get("Etag"), `"`),
		Partial:     resp.StatusCode == http.StatusPartialContent,
	}
	if info.Partial {
		info.TotalSize = -1
		if cr := h.Get("Content-Range"); cr != "" {
			if i := strings.LastIndexByte(cr, '/'); i >= 0 {
				if n, err := strconv.ParseInt(cr[i+1:], 10, 64); err == nil {
					info.TotalSize = n
				}
			}
		}
	}
	if lm := h.Get("Last-Modified"); lm != "" {
		info.LastModified, _ = http.ParseTime(lm)
	}
	if cd := h.Get("Content-Disposition"); cd != "" {
		if _, params, err := mime.ParseMediaType(cd); err == nil {
			info.Name = params["filename"]
		}
	}
	return info
}

// Delete removes needle id. The first location that accepts the delete
// wins: the volume server forwards it to the other replicas. A missing
// needle is ErrNotFound.
func (c *Client) Delete(ctx context.Context, id fid.FileID) error {
	return c.onLocations(ctx, id.Volume, func(loc Location, _ bool) error {
		target := volumeURL(loc.URL, id)
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, target, nil)
		if err != nil {
			return fmt.Errorf("client: delete request: %w", err)
		}
		if c.signer != nil {
			req.Header["Authorization"] = []string{"Bearer " + c.signer.Sign(id, 1)}
		}
		resp, err := c.doVolume(req, 0)
		if err != nil {
			return fmt.Errorf("client: delete %s: %w", target, err)
		}
		if resp.StatusCode/100 != 2 {
			he, _ := c.httpError(resp)
			return he
		}
		drainClose(resp.Body)
		return nil
	})
}

// preferFirst moves the location of url (if any) to the front of a copy of locs.
func (c *Client) preferFirst(locs []Location, url string) []Location {
	if url == "" || len(locs) < 2 || locs[0].URL == url {
		return locs
	}
	i := slices.IndexFunc(locs, func(l Location) bool { return l.URL == url })
	if i < 0 {
		return locs
	}
	out := make([]Location, 0, len(locs))
	out = append(out, locs[i])
	out = append(out, locs[:i]...)
	return append(out, locs[i+1:]...)
}

// onLocations runs try on volume vol's locations, healthiest first (see
// health.go), until one succeeds; try's more says whether another location
// is left to try after this one. A failure that another server cannot fix
// (a 4xx other than 404) ends it at once. When every location failed, the
// cached locations are dropped; if they came from the cache, the master is
// asked again and the servers not yet tried are tried. The error returned
// prefers a real failure over a 404, because a replica that was not reached
// might hold the needle.
func (c *Client) onLocations(ctx context.Context, vol uint32, try func(loc Location, more bool) error) error {
	return c.onLocationsPrefer(ctx, vol, 0, try)
}

// onLocationsPrefer is onLocations that, for a needle (key) of an
// erasure-coded volume, tries the healthy holder of its data shard first
// (see ecroute.go). key 0 means no preference.
func (c *Client) onLocationsPrefer(ctx context.Context, vol uint32, key uint64, try func(loc Location, more bool) error) error {
	locs, cached, err := c.lookup(ctx, vol)
	if err != nil {
		return err
	}
	var tried map[string]bool // allocated on the first failure only
	var notFound, failure error
	for round := 0; ; round++ {
		locs = c.orderLocations(locs)
		if key != 0 {
			if ec := c.preferEC(ctx, vol, key, locs); ec != "" {
				locs = c.preferFirst(locs, ec)
			} else {
				locs = c.preferFirst(locs, c.localCopy(locs))
			}
		}
		left := 0
		for _, loc := range locs {
			if !tried[loc.URL] {
				left++
			}
		}
		for _, loc := range locs {
			if tried[loc.URL] {
				continue
			}
			left--
			err := try(loc, left > 0)
			if err == nil {
				return nil
			}
			if ctx.Err() != nil {
				return err
			}
			if tried == nil {
				tried = make(map[string]bool, len(locs))
			}
			tried[loc.URL] = true
			if errors.Is(err, ErrNotFound) {
				notFound = err
				continue
			}
			if !retryable(ctx, err) {
				return err
			}
			c.log.Debug("client: volume server failed, trying next location", "volume", vol, "server", loc.URL, "err", err)
			failure = err
		}
		c.Invalidate(vol)
		if !cached || round > 0 {
			break
		}
		locs, cached, err = c.lookup(ctx, vol)
		if err != nil {
			if failure == nil && notFound == nil {
				return err
			}
			break
		}
	}
	if failure != nil {
		return failure
	}
	return notFound
}

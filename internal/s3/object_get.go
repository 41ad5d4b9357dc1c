package s3

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kelpfs/kelp/internal/httpserve"
	"github.com/kelpfs/kelp/internal/objectapi"
	"github.com/kelpfs/kelp/internal/sse"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// parseTime reads an HTTP date; a malformed one is ignored, as S3 does.
func parseTime(v string) time.Time {
	if v == "" {
		return time.Time{}
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return time.Time{}
	}
	return t
}

func conditions(h http.Header, prefix string) objectapi.Conditions {
	return objectapi.Conditions{
		IfMatch:           h.Get(prefix + "If-Match"),
		IfNoneMatch:       h.Get(prefix + "If-None-Match"),
		IfModifiedSince:   parseTime(h.Get(prefix + "If-Modified-Since")),
		IfUnmodifiedSince: parseTime(h.Get(prefix + "If-Unmodified-Since")),
	}
}

func (s *Server) getObject(rq *request) error  { return s.readObject(rq, false) }
func (s *Server) headObject(rq *request) error { return s.readObject(rq, true) }

// responseOverrides are the query parameters that replace response
// headers of a GET (used by presigned download links).
var responseOverrides = map[string]string{
	"response-content-type":        "Content-Type",
	"response-content-language":    "Content-Language",
	"response-expires":             "Expires",
	"response-cache-control":       "Cache-Control",
	"response-content-disposition": "Content-Disposition",
	"response-content-encoding":    "Content-Encoding",
}

func (s *Server) readObject(rq *request, head bool) error {
	for q := range responseOverrides {
		// Checked before any work: Go's server would write a control
		// character into the header and the client could not parse it.
		if !validHeaderValue(rq.q.Get(q)) {
			return &apiError{Code: "InvalidArgument", Status: http.StatusBadRequest,
				Message: "The value of " + q + " contains control characters."}
		}
	}
	opts := objectapi.GetOptions{Conditions: conditions(rq.r.Header, ""), NoBody: head}
	if pn := rq.q.Get("partNumber"); pn != "" {
		n, err := strconv.Atoi(pn)
		if err != nil || n < 1 || n > objectapi.MaxParts {
			return &apiError{Code: "InvalidArgument", Status: 400, Message: "Part number must be an integer between 1 and 10000, inclusive"}
		}
		opts.PartNumber = n
	} else if rg := rq.r.Header.Get("Range"); rg != "" {
		opts.Range = objectapi.ParseRange(rg)
	}
	opts.VersionID = rq.q.Get("versionId")
	opts.Keys = s.readKeys(rq)
	o, err := s.layer.GetObject(rq.ctx, rq.bucket, rq.key, opts)
	if err != nil {
		if ae := toAPIError(err); ae.Status == http.StatusNotModified || ae.Status == http.StatusPreconditionFailed {
			// The validators go with 304 and 412 too.
			if info, ierr := s.layer.GetObject(rq.ctx, rq.bucket, rq.key, objectapi.GetOptions{NoBody: true, VersionID: opts.VersionID, Keys: opts.Keys}); ierr == nil {
				rq.w.Header().Set("ETag", quote(info.Info.ETag))
				rq.w.Header().Set("Last-Modified", info.Info.LastModified.UTC().Format(http.TimeFormat))
			}
		}
		if ae := toAPIError(err); ae.Code == "InvalidRange" {
			if info, ierr := s.layer.GetObject(rq.ctx, rq.bucket, rq.key, objectapi.GetOptions{NoBody: true, VersionID: opts.VersionID, Keys: opts.Keys}); ierr == nil {
				rq.w.Header().Set("Content-Range", "bytes */"+itoa(info.Info.Size))
			}
		}
		return err
	}
	if o.Body != nil {
		defer o.Body.Close()
	}
	h := rq.w.Header()
	s.objectHeaders(h, o.Info, rq.r.Header.Get("x-amz-checksum-mode") == "ENABLED" && !o.Partial ||
		opts.PartNumber == 1 && o.Info.Parts == 0 && rq.r.Header.Get("x-amz-checksum-mode") == "ENABLED")
	sseHeaders(h, o.Info.SSE, rq.r.Header, false)
	if opts.VersionID == "" {
		s.setExpiration(rq, h, o.Info)
	}
	for q, hname := range responseOverrides {
		if v := rq.q.Get(q); v != "" {
			h.Set(hname, v)
		}
	}
	h.Set("Content-Length", itoa(o.Length))
	status := http.StatusOK
	if o.Partial && (opts.Range != nil || o.Info.Parts > 0) {
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", o.Start, o.Start+o.Length-1, o.Info.Size))
		if o.Length == 0 {
			h.Del("Content-Range")
		} else {
			status = http.StatusPartialContent
		}
	}
	if opts.PartNumber > 0 {
		h.Set("x-amz-mp-parts-count", strconv.Itoa(max(o.Info.Parts, 1)))
	}
	if head {
		rq.w.WriteHeader(status)
		return nil
	}
	// The status waits for the body's first bytes: a first chunk that
	// cannot be fetched is answered as the error it is (503 SlowDown, say),
	// not as a 200 that stops short.
	hw := httpserve.Hold(rq.w)
	hw.WriteHeader(status)
	n, err := s.copyBody(hw, o.Body, o.Length, o.Info.SSE != nil)
	if err == nil && n != o.Length {
		err = io.ErrUnexpectedEOF
	}
	if err != nil && !hw.Sent() {
		hw.Retract()
		for k := range h {
			if strings.HasPrefix(strings.ToLower(k), "x-amz-") && !strings.EqualFold(k, "x-amz-request-id") && !strings.EqualFold(k, "x-amz-id-2") {
				h.Del(k)
			}
		}
		return err
	}
	hw.Send() // an empty body
	if err != nil {
		s.log.Warn("s3: GET ended early", "bucket", rq.bucket, "key", rq.key, "sent", n, "of", o.Length, "err", err)
		panic(http.ErrAbortHandler) // the client must see a failed transfer
	}
	return nil
}

// copyBody copies body (length bytes) to w. A body longer than two
// buffers is read ahead in a goroutine into a ring of buffers while the
// filled ones are written: the chunk fetches (and decryption) overlap the
// socket writes, with no more copies than a plain io.CopyBuffer.
//
// A plain body goes in readAhead pieces of bigBufSize: one read from the
// volume (one pread, in `kelp server`) and one socket write per MiB, and
// the next chunk's request is made while three MiB still wait to be
// written, so a stall at a chunk boundary or a late wake-up of either
// goroutine on a busy machine does not leave the socket idle.
//
// An encrypted body (sealed) goes in pieces of copyBufSize, each sent once
// it has pieceMin: the decrypter then opens sixteen whole segments in place
// in the buffer and returns, and the next piece starts on a
// segment boundary again (io.ReadFull would ask for the buffer's last 64
// bytes, which cost a segment opened aside and copied, and every later
// piece a copy).
func (s *Server) copyBody(w io.Writer, body io.Reader, length int64, sealed bool) (int64, error) {
	pool, least := &s.bigBufs, bigBufSize
	if sealed {
		pool, least = &s.bufs, pieceMin
	}
	depth := readAhead
	bp := pool.Get().(*[]byte)
	defer pool.Put(bp)
	if length <= 2*int64(len(*bp)) {
		return io.CopyBuffer(onlyWriter{w}, body, *bp)
	}
	type piece struct {
		b   *[]byte
		n   int
		err error // io.EOF at the body's end
	}
	free := make(chan *[]byte, depth)
	full := make(chan piece, depth)
	stop := make(chan struct{})
	done := make(chan struct{})
	free <- bp
	for range depth - 1 {
		b := pool.Get().(*[]byte)
		defer pool.Put(b)
		free <- b
	}
	go func() {
		defer close(done)
		for {
			var b *[]byte
			select {
			case b = <-free:
			case <-stop:
				return
			}
			n, err := io.ReadAtLeast(body, *b, least)
			if err == io.ErrUnexpectedEOF {
				err = io.EOF // a short last piece
			}
			full <- piece{b, n, err} // never blocks: as many slots as buffers
			if err != nil {
				return
			}
		}
	}()
	// The reader must be idle before the body is closed and the buffers
	// go back to the pool.
	defer func() { close(stop); <-done }()
	var total int64
	for {
		p := <-full
		if p.n > 0 {
			n, err := w.Write((*p.b)[:p.n])
			total += int64(n)
			if err != nil {
				return total, err
			}
		}
		if p.err == io.EOF {
			return total, nil
		}
		if p.err != nil {
			return total, p.err
		}
		free <- p.b
	}
}

// copyBufSize is the size of copyBody's buffers for encrypted bodies:
// sixteen whole segments with their tags, which the decrypter reads and
// opens in place, each segment's plaintext right after the previous one's
// (1 MiB of plaintext, as a plain body's piece); pieceMin is what such a piece holds at least unless the
// body ends first. bigBufSize is the size of a plain body's buffers, and
// readAhead how many buffers a body has.
const (
	copyBufSize = 4 * sse.PieceSize
	pieceMin    = copyBufSize - sse.SegmentSize - sse.TagSize
	bigBufSize  = 1 << 20
	readAhead   = 4
)

// onlyWriter hides ReadFrom, so that CopyBuffer uses our large buffer.
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(p []byte) (int, error) { return o.w.Write(p) }

// objectHeaders sets the stored headers of an object.
func (s *Server) objectHeaders(h http.Header, oi objectapi.ObjectInfo, checksums bool) {
	h.Set("ETag", quote(oi.ETag))
	h.Set("Last-Modified", oi.LastModified.UTC().Format(http.TimeFormat))
	h.Set("Accept-Ranges", "bytes")
	setVersionID(h, oi.VersionID)
	ct := oi.ContentType
	if ct == "" {
		ct = "binary/octet-stream"
	}
	h.Set("Content-Type", ct)
	for k, v := range oi.Headers {
		h.Set(k, v)
	}
	for k, v := range oi.UserMeta {
		// S3 sends metadata names in lower case, and clients (boto, the aws
		// CLI) report them as sent; the raw map key keeps Go from
		// capitalising them.
		h["x-amz-meta-"+strings.ToLower(k)] = []string{v}
	}
	if oi.TagCount > 0 {
		h.Set("x-amz-tagging-count", strconv.Itoa(oi.TagCount))
	}
	if checksums && oi.Checksum.Algorithm != "" {
		h.Set("x-amz-checksum-"+strings.ToLower(oi.Checksum.Algorithm), oi.Checksum.Value)
		h.Set("x-amz-checksum-type", oi.Checksum.Type)
	}
	setLockHeaders(h, oi.Lock)
}

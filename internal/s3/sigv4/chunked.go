package sigv4

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"net/http"
	"strings"
)

// The aws-chunked body (Content-Encoding: aws-chunked) is a sequence of
//
//	<hex size>[;chunk-signature=<64 hex>]\r\n<size bytes>\r\n
//
// ending with a zero-size chunk, then optional trailing header lines
// "name:value\r\n" (with "x-amz-trailer-signature:<64 hex>\r\n" last when
// the trailer is signed) and an empty line "\r\n". Chunk signatures chain:
// each one signs its data and the previous signature, starting from the
// request's (seed) signature, so chunks cannot be dropped, reordered or
// spliced from another upload.

const (
	// maxChunkLine bounds a chunk header or trailer line. The longest
	// legitimate one is a 16-digit size plus a chunk-signature extension.
	maxChunkLine = 4 << 10
	// maxChunkSize bounds one chunk's declared size; nothing is buffered per
	// chunk, this only keeps the arithmetic far from overflow.
	maxChunkSize = 1 << 40
	readBufSize  = 64 << 10

	chunkAlgorithm   = "AWS4-HMAC-SHA256-PAYLOAD"
	trailerAlgorithm = "AWS4-HMAC-SHA256-TRAILER"
	chunkSigPrefix   = "chunk-signature="
	trailerSigName   = "x-amz-trailer-signature"
)

type chunkConfig struct {
	signed   bool // chunk signatures present and verified
	trailers bool // trailing headers allowed (and signed when signed)
	key      []byte
	amzDate  string
	scope    string
	seed     string   // the request signature
	declared int64    // x-amz-decoded-content-length, -1 unknown
	expect   []string // lower-case names from x-amz-trailer
}

type chunkState int

const (
	stHeader chunkState = iota
	stData
	stDone
)

type namedSum struct {
	name string
	h    hash.Hash
}

// chunkReader decodes and verifies an aws-chunked body incrementally: it
// holds one read buffer and the running hashes, never a whole chunk. Data
// is handed out before its chunk's signature is checked (the signature
// comes after the data); a failed check surfaces as an error from Read, so
// only a body read to io.EOF is authentic.
type chunkReader struct {
	cfg       chunkConfig
	src       io.ReadCloser
	br        *bufio.Reader
	state     chunkState
	err       error
	prevSig   string
	chunkSig  string
	remaining int64
	total     int64
	h         hash.Hash
	sums      []namedSum
	trailer   http.Header
}

func newChunkReader(src io.ReadCloser, cfg chunkConfig) *chunkReader {
	if src == nil {
		src = http.NoBody
	}
	c := &chunkReader{cfg: cfg, src: src, br: bufio.NewReaderSize(src, readBufSize), prevSig: cfg.seed}
	if cfg.signed {
		c.h = sha256.New()
	}
	for _, name := range cfg.expect {
		if h := newChecksum(name); h != nil {
			c.sums = append(c.sums, namedSum{name, h})
		}
	}
	return c
}

func (c *chunkReader) done() bool { return c.state == stDone && c.err == nil }

func (c *chunkReader) Close() error { return c.src.Close() }

func (c *chunkReader) Read(p []byte) (int, error) {
	for {
		if c.err != nil {
			return 0, c.err
		}
		switch c.state {
		case stDone:
			return 0, io.EOF
		case stHeader:
			c.err = c.readChunkHeader()
		case stData:
			if len(p) == 0 {
				return 0, nil
			}
			if int64(len(p)) > c.remaining {
				p = p[:c.remaining]
			}
			n, err := c.br.Read(p)
			c.consume(p[:n])
			if c.remaining == 0 {
				c.err = c.endChunk()
			} else if err != nil {
				c.err = sourceErr(err)
			}
			if n > 0 || c.err != nil {
				return n, c.err
			}
		}
	}
}

func (c *chunkReader) consume(b []byte) {
	c.remaining -= int64(len(b))
	c.total += int64(len(b))
	if c.h != nil {
		c.h.Write(b)
	}
	for _, s := range c.sums {
		s.h.Write(b)
	}
}

// sourceErr turns a premature end of the body into IncompleteBody and
// passes other transport errors (timeouts, size limits) through unchanged.
func sourceErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return ErrIncompleteBody.with("the aws-chunked body ended before its final chunk")
	}
	return err
}

// readLine returns the next CRLF-terminated line without its CRLF.
func (c *chunkReader) readLine() (string, error) {
	line, err := c.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull || len(line) > maxChunkLine {
		return "", ErrMalformedChunk.with("chunk header or trailer line longer than %d bytes", maxChunkLine)
	}
	if err != nil {
		return "", sourceErr(err)
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return "", ErrMalformedChunk.with("chunk line not terminated by CRLF")
	}
	return string(line[:len(line)-2]), nil
}

func (c *chunkReader) readChunkHeader() error {
	line, err := c.readLine()
	if err != nil {
		return err
	}
	sizeStr, ext, hasExt := strings.Cut(line, ";")
	size, ok := parseHexSize(sizeStr)
	if !ok {
		return ErrMalformedChunk.with("invalid chunk size %q", truncate(sizeStr))
	}
	if c.cfg.signed {
		sig, ok := strings.CutPrefix(ext, chunkSigPrefix)
		if !hasExt || !ok || !validSignature(sig) {
			return ErrMalformedChunk.with("chunk header %q lacks a valid chunk-signature", truncate(line))
		}
		c.chunkSig = sig
	}
	if c.cfg.declared >= 0 && c.total+size > c.cfg.declared {
		return ErrIncompleteBody.with("the chunks carry more than x-amz-decoded-content-length (%d) bytes", c.cfg.declared)
	}
	if size > 0 {
		c.remaining = size
		c.state = stData
		return nil
	}
	// The final, empty chunk: it is signed like the others (over no data).
	if err := c.verifyChunk(); err != nil {
		return err
	}
	if err := c.readTrailers(); err != nil {
		return err
	}
	if c.cfg.declared >= 0 && c.total != c.cfg.declared {
		return ErrIncompleteBody.with("the chunks carry %d bytes, x-amz-decoded-content-length says %d", c.total, c.cfg.declared)
	}
	if err := c.checkSums(); err != nil {
		return err
	}
	var one [1]byte
	if n, _ := io.ReadFull(c.br, one[:]); n > 0 {
		return ErrMalformedChunk.with("data after the final chunk")
	}
	c.state = stDone
	return nil
}

// endChunk consumes the CRLF after a chunk's data and checks its signature.
func (c *chunkReader) endChunk() error {
	line, err := c.readLine()
	if err != nil {
		return err
	}
	if line != "" {
		return ErrMalformedChunk.with("chunk data longer than its declared size")
	}
	if err := c.verifyChunk(); err != nil {
		return err
	}
	c.state = stHeader
	return nil
}

func (c *chunkReader) verifyChunk() error {
	if !c.cfg.signed {
		return nil
	}
	sts := chunkAlgorithm + "\n" + c.cfg.amzDate + "\n" + c.cfg.scope + "\n" + c.prevSig + "\n" +
		emptySHA256 + "\n" + hex.EncodeToString(c.h.Sum(nil))
	c.h.Reset()
	if !signatureMatches(c.cfg.key, sts, c.chunkSig) {
		return ErrSignatureDoesNotMatch.with("chunk signature %s does not match (chunk ending at decoded byte %d)", c.chunkSig, c.total)
	}
	c.prevSig = c.chunkSig
	return nil
}

// readTrailers reads the lines after the final chunk up to the empty line,
// checks them against x-amz-trailer and, when signed, the trailer
// signature, which signs "name:value\n" for each trailer in order.
func (c *chunkReader) readTrailers() error {
	var canon strings.Builder
	sig := ""
	for i := 0; ; i++ {
		line, err := c.readLine()
		if err != nil {
			return err
		}
		if line == "" {
			break
		}
		if sig != "" || i > maxTrailers {
			return ErrMalformedTrailer.with("unexpected trailer line %q", truncate(line))
		}
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			return ErrMalformedTrailer.with("trailer line %q is not name:value", truncate(line))
		}
		name = strings.ToLower(strings.TrimSpace(name))
		val = strings.TrimSpace(val)
		if name == trailerSigName && c.cfg.signed && c.cfg.trailers {
			if !validSignature(val) {
				return ErrMalformedTrailer.with("invalid %s", trailerSigName)
			}
			sig = val
			continue
		}
		if !c.cfg.trailers || !contains(c.cfg.expect, name) {
			return ErrMalformedTrailer.with("trailer %q was not declared in x-amz-trailer", truncate(name))
		}
		if c.trailer == nil {
			c.trailer = make(http.Header)
		}
		key := http.CanonicalHeaderKey(name)
		if _, dup := c.trailer[key]; dup {
			return ErrMalformedTrailer.with("trailer %q sent twice", name)
		}
		c.trailer[key] = []string{val}
		canon.WriteString(name + ":" + val + "\n")
	}
	for _, name := range c.cfg.expect {
		if c.trailer.Get(name) == "" {
			return ErrMalformedTrailer.with("declared trailer %q is missing", name)
		}
	}
	if c.cfg.signed && c.cfg.trailers {
		if sig == "" {
			return ErrMalformedTrailer.with("the trailer has no %s", trailerSigName)
		}
		sts := trailerAlgorithm + "\n" + c.cfg.amzDate + "\n" + c.cfg.scope + "\n" + c.prevSig + "\n" + sha256Hex(canon.String())
		if !signatureMatches(c.cfg.key, sts, sig) {
			return ErrSignatureDoesNotMatch.with("the trailer signature does not match")
		}
	}
	return nil
}

func (c *chunkReader) checkSums() error {
	for _, s := range c.sums {
		got := base64.StdEncoding.EncodeToString(s.h.Sum(nil))
		if want := c.trailer.Get(s.name); want != got {
			alg := strings.ToUpper(strings.TrimPrefix(s.name, "x-amz-checksum-"))
			return ErrBadDigest.with("The %s you specified (%s) did not match the calculated checksum (%s).", alg, truncate(want), got)
		}
	}
	return nil
}

func parseHexSize(s string) (int64, bool) {
	if s == "" || len(s) > 16 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		n = n<<4 | int64(d)
		if n > maxChunkSize {
			return 0, false
		}
	}
	return n, true
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// truncate keeps error messages short when a client sends garbage.
func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

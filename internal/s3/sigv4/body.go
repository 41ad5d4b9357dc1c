package sigv4

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"net/http"
	"strings"
)

// ContentEncoding returns the Content-Encoding to store with an object:
// the request's, without the "aws-chunked" coding, which describes only
// the transfer framing that Verify's body removes.
func ContentEncoding(h http.Header) string {
	var keep []string
	for _, v := range h.Values("Content-Encoding") {
		for _, c := range strings.Split(v, ",") {
			c = strings.TrimSpace(c)
			if c != "" && !strings.EqualFold(c, "aws-chunked") {
				keep = append(keep, c)
			}
		}
	}
	return strings.Join(keep, ",")
}

// sha256Reader passes the body through and, at EOF, compares its SHA-256
// with the signed x-amz-content-sha256: a mismatch replaces io.EOF with
// ErrContentSHA256Mismatch, so a handler that stores only what it read up
// to a clean EOF never keeps a tampered body.
type sha256Reader struct {
	src  io.ReadCloser
	h    hash.Hash
	want string // lower-case hex
	err  error  // sticky final result
}

func newSHA256Reader(src io.ReadCloser, want string) *sha256Reader {
	if src == nil {
		src = http.NoBody
	}
	return &sha256Reader{src: src, h: sha256.New(), want: want}
}

func (s *sha256Reader) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.src.Read(p)
	s.h.Write(p[:n])
	if err == io.EOF {
		if got := hex.EncodeToString(s.h.Sum(nil)); got != s.want {
			err = ErrContentSHA256Mismatch.with("The provided 'x-amz-content-sha256' header does not match what was computed: client %s, computed %s", s.want, got)
		}
		s.err = err
	}
	return n, err
}

func (s *sha256Reader) Close() error { return s.src.Close() }

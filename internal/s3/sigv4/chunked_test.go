package sigv4

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"hash/crc64"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

const (
	modeSigned        = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	modeSignedTrailer = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
	modeUnsignedTrail = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
)

func testData(n int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func crc32Trailer(data []byte) string {
	return "x-amz-checksum-crc32:" + b64(binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(data)))
}

// readAllSmall reads with tiny, odd-sized buffers to exercise chunk
// boundaries falling inside reads.
func readAllSmall(r io.Reader) ([]byte, error) {
	var out bytes.Buffer
	buf := make([]byte, 7)
	for {
		n, err := r.Read(buf)
		out.Write(buf[:n])
		if err == io.EOF {
			return out.Bytes(), nil
		}
		if err != nil {
			return out.Bytes(), err
		}
	}
}

func TestChunkedRoundTrip(t *testing.T) {
	data := testData(200_003)
	for _, c := range []struct {
		name, mode, trailerNames string
		encode                   func(seed string) []byte
	}{
		{"signed", modeSigned, "", func(seed string) []byte { return chunked(newChunkSigner(seed, testNow), data, 65536) }},
		{"signed small chunks", modeSigned, "", func(seed string) []byte { return chunked(newChunkSigner(seed, testNow), data, 8192) }},
		{"signed trailer", modeSignedTrailer, "x-amz-checksum-crc32", func(seed string) []byte {
			return chunked(newChunkSigner(seed, testNow), data, 65536, crc32Trailer(data))
		}},
		{"unsigned trailer", modeUnsignedTrail, "x-amz-checksum-crc32", func(string) []byte {
			return chunked(nil, data, 65536, crc32Trailer(data))
		}},
	} {
		for _, small := range []bool{false, true} {
			r := streamingRequest(t, c.mode, len(data), c.trailerNames, c.encode)
			res, err := testVerifier().Verify(r)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			var got []byte
			if small {
				got, err = readAllSmall(r.Body)
			} else {
				got, err = io.ReadAll(r.Body)
			}
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%s small=%v: %d bytes, err %v", c.name, small, len(got), err)
			}
			if r.ContentLength != int64(len(data)) || res.DecodedContentLength != int64(len(data)) {
				t.Fatalf("%s: content length %d / %d", c.name, r.ContentLength, res.DecodedContentLength)
			}
			if c.trailerNames != "" && res.Trailer().Get(c.trailerNames) != strings.TrimPrefix(crc32Trailer(data), "x-amz-checksum-crc32:") {
				t.Fatalf("%s: trailer %v", c.name, res.Trailer())
			}
		}
	}
}

func TestChunkedEmptyObject(t *testing.T) {
	r := streamingRequest(t, modeSigned, 0, "", func(seed string) []byte { return chunked(newChunkSigner(seed, testNow), nil, 65536) })
	if _, err := testVerifier().Verify(r); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(r.Body); err != nil || len(b) != 0 {
		t.Fatalf("%q %v", b, err)
	}
}

// TestChunkedTampering alters a valid signed-trailer body in every way a
// man in the middle or a broken client could and checks the error kind.
func TestChunkedTampering(t *testing.T) {
	data := testData(150_000)
	valid := func(seed string) []byte {
		return chunked(newChunkSigner(seed, testNow), data, 65536, crc32Trailer(data))
	}
	cases := []struct {
		name   string
		decl   int
		encode func(seed string) []byte
		want   error
	}{
		{"data byte flipped", len(data), func(seed string) []byte {
			b := valid(seed)
			i := bytes.Index(b, []byte("\r\n")) + 2 + 1000
			b[i] ^= 1
			return b
		}, ErrSignatureDoesNotMatch},
		{"chunk signature changed", len(data), func(seed string) []byte {
			b := valid(seed)
			i := bytes.Index(b, []byte("chunk-signature=")) + len("chunk-signature=")
			b[i] = flipHex(string(b[i : i+1]))[0]
			return b
		}, ErrSignatureDoesNotMatch},
		{"wrong seed", len(data), func(seed string) []byte {
			return chunked(newChunkSigner(flipHex(seed), testNow), data, 65536, crc32Trailer(data))
		}, ErrSignatureDoesNotMatch},
		{"chunks reordered", len(data), func(seed string) []byte {
			// Each frame keeps its own valid signature, but the chain no
			// longer links: the first frame sent was signed after another.
			b := valid(seed)
			first := bytes.Index(b, []byte("\r\n10000;")) + 2
			second := first + bytes.Index(b[first+2:], []byte("\r\n")) + 2 + 2 + 65536 + 2
			out := append([]byte{}, b[first:second]...)
			out = append(out, b[:first]...)
			return append(out, b[second:]...)
		}, ErrSignatureDoesNotMatch},
		{"chunk dropped", len(data) - 65536, func(seed string) []byte {
			return chunked(newChunkSigner(seed, testNow), data[65536:], 65536, crc32Trailer(data[65536:]))
		}, nil}, // re-signed by the key holder: valid, and a different object
		{"trailer value changed", len(data), func(seed string) []byte {
			cs := newChunkSigner(seed, testNow)
			b := chunked(cs, data, 65536, crc32Trailer(data))
			return bytes.Replace(b, []byte(crc32Trailer(data)), []byte("x-amz-checksum-crc32:AAAAAA=="), 1)
		}, ErrSignatureDoesNotMatch},
		{"trailer signature missing", len(data), func(seed string) []byte {
			b := valid(seed)
			i := bytes.Index(b, []byte("x-amz-trailer-signature:"))
			return append(b[:i:i], "\r\n"...)
		}, ErrMalformedTrailer},
		{"wrong checksum, correctly signed", len(data), func(seed string) []byte {
			return chunked(newChunkSigner(seed, testNow), data, 65536, "x-amz-checksum-crc32:AAAAAA==")
		}, ErrBadDigest},
		{"undeclared trailer", len(data), func(seed string) []byte {
			return chunked(newChunkSigner(seed, testNow), data, 65536, crc32Trailer(data), "x-amz-meta-x:1")
		}, ErrMalformedTrailer},
		{"declared trailer missing", len(data), func(seed string) []byte {
			return chunked(newChunkSigner(seed, testNow), data, 65536)
		}, ErrMalformedTrailer},
		{"truncated in data", len(data), func(seed string) []byte { return valid(seed)[:70000] }, ErrIncompleteBody},
		{"truncated in header", len(data), func(seed string) []byte {
			b := valid(seed)
			return b[:bytes.Index(b, []byte("\r\n"))-3]
		}, ErrIncompleteBody},
		{"truncated before final CRLF", len(data), func(seed string) []byte { b := valid(seed); return b[:len(b)-2] }, ErrIncompleteBody},
		{"decoded length larger", len(data) + 1, valid, ErrIncompleteBody},
		{"decoded length smaller", len(data) - 1, valid, ErrIncompleteBody},
		{"extra bytes after end", len(data), func(seed string) []byte { return append(valid(seed), 'x') }, ErrMalformedChunk},
		{"chunk longer than size", len(data), func(seed string) []byte {
			return bytes.Replace(valid(seed), []byte("10000;"), []byte("fffe;"), 1)
		}, ErrMalformedChunk},
		{"bad size", len(data), func(seed string) []byte {
			return bytes.Replace(valid(seed), []byte("10000;"), []byte("1x000;"), 1)
		}, ErrMalformedChunk},
		{"no chunk signature", len(data), func(string) []byte { return chunked(nil, data, 65536, crc32Trailer(data)) }, ErrMalformedChunk},
		{"LF without CR", len(data), func(seed string) []byte { return bytes.Replace(valid(seed), []byte("\r\n"), []byte("\n"), 1) }, ErrMalformedChunk},
		{"huge header line", len(data), func(string) []byte { return []byte(strings.Repeat("1", 10000) + "\r\n") }, ErrMalformedChunk},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := streamingRequest(t, modeSignedTrailer, c.decl, "x-amz-checksum-crc32", c.encode)
			res, err := testVerifier().Verify(r)
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.ReadAll(r.Body)
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
			if res.Trailer() != nil {
				t.Fatal("trailer exposed after a failed body")
			}
			if _, err2 := r.Body.Read(make([]byte, 10)); !errors.Is(err2, c.want) {
				t.Fatalf("error not sticky: %v", err2)
			}
		})
	}
}

func TestStreamingHeaders(t *testing.T) {
	// Signed streaming needs x-amz-decoded-content-length.
	r := streamingRequest(t, modeSigned, 10, "", func(string) []byte { return nil })
	r.Header.Del("X-Amz-Decoded-Content-Length")
	if _, err := testVerifier().Verify(r); !errors.Is(err, ErrMissingSecurityHeader) {
		t.Fatalf("missing decoded length: %v", err)
	}
	// SigV4a streaming is refused clearly.
	r = streamingRequest(t, "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD", 10, "", func(string) []byte { return nil })
	if _, err := testVerifier().Verify(r); !errors.Is(err, ErrUnsupportedAuth) {
		t.Fatalf("sigv4a: %v", err)
	}
}

func TestTrailerChecksums(t *testing.T) {
	data := testData(100_000)
	crc64nvme := crc64.New(crc64.MakeTable(0x9a6c9329ac4bc9b5))
	crc64nvme.Write(data)
	crc32c := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	crc32c.Write(data)
	s1 := sha1.Sum(data)
	s256 := sha256.Sum256(data)
	sums := map[string]string{
		"x-amz-checksum-crc32":     b64(binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(data))),
		"x-amz-checksum-crc32c":    b64(crc32c.Sum(nil)),
		"x-amz-checksum-crc64nvme": b64(crc64nvme.Sum(nil)),
		"x-amz-checksum-sha1":      b64(s1[:]),
		"x-amz-checksum-sha256":    b64(s256[:]),
	}
	for name, sum := range sums {
		for _, good := range []bool{true, false} {
			val := sum
			if !good {
				val = b64(make([]byte, len(mustB64(sum))))
			}
			r := streamingRequest(t, modeUnsignedTrail, len(data), name, func(string) []byte {
				return chunked(nil, data, 65536, name+":"+val)
			})
			res, err := testVerifier().Verify(r)
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.ReadAll(r.Body)
			if good && (err != nil || res.Trailer().Get(name) != sum) {
				t.Fatalf("%s: err %v trailer %v", name, err, res.Trailer())
			}
			if !good && !errors.Is(err, ErrBadDigest) {
				t.Fatalf("%s wrong value: %v", name, err)
			}
		}
	}
}

func mustB64(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func TestCRC64NVMECheckValue(t *testing.T) {
	// The CRC-64/NVME catalogue check value: crc("123456789").
	h := newChecksum("x-amz-checksum-crc64nvme")
	h.Write([]byte("123456789"))
	if got := binary.BigEndian.Uint64(h.Sum(nil)); got != 0xae8b14860a799888 {
		t.Fatalf("crc64nvme check %016x", got)
	}
	h = newChecksum("x-amz-checksum-crc32c")
	h.Write([]byte("123456789"))
	if got := binary.BigEndian.Uint32(h.Sum(nil)); got != 0xe3069283 {
		t.Fatalf("crc32c check %08x", got)
	}
	if newChecksum("x-amz-checksum-md5") != nil || newChecksum("x-amz-meta-a") != nil {
		t.Fatal("unknown checksum names must give nil")
	}
}

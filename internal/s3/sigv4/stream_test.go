package sigv4

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"testing"
)

// chunkStream writes an aws-chunked body of total bytes (chunks of size
// n) to w as it goes, never holding more than one chunk.
func chunkStream(w *io.PipeWriter, cs *chunkSigner, total, n int) {
	chunk := make([]byte, n)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	write := func(b []byte) {
		fmt.Fprintf(w, "%x", len(b))
		if cs != nil {
			io.WriteString(w, ";chunk-signature="+cs.sign(b))
		}
		io.WriteString(w, "\r\n")
		if len(b) > 0 {
			w.Write(b)
			io.WriteString(w, "\r\n")
		}
	}
	for left := total; left > 0; left -= n {
		write(chunk[:min(n, left)])
	}
	write(nil)
	io.WriteString(w, "\r\n")
	w.Close()
}

// TestChunkedStreamsIncrementally decodes a body far larger than anything
// the decoder may hold and checks the heap grew by a small constant.
func TestChunkedStreamsIncrementally(t *testing.T) {
	total := 128 << 20
	if testing.Short() {
		total = 32 << 20
	}
	for _, signed := range []bool{true, false} {
		mode := modeSigned
		if !signed {
			mode = modeUnsignedTrail
		}
		pr, pw := io.Pipe()
		var r *http.Request
		r = streamingRequest(t, mode, total, "", func(seed string) []byte {
			var cs *chunkSigner
			if signed {
				cs = newChunkSigner(seed, testNow)
			}
			go chunkStream(pw, cs, total, 1<<20) // ends when the body is read or closed
			return nil
		})
		r.Body = pr
		if _, err := testVerifier().Verify(r); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		n, err := io.CopyBuffer(io.Discard, r.Body, make([]byte, 32<<10))
		runtime.ReadMemStats(&after)
		r.Body.Close()
		if err != nil || n != int64(total) {
			t.Fatalf("signed=%v: copied %d, err %v", signed, n, err)
		}
		// The producer allocates its fixed 1 MiB chunk plus formatting
		// garbage; the decoder its 64 KiB buffer. A decoder that buffered
		// the body would allocate hundreds of MiB.
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
			t.Fatalf("signed=%v: allocated %d bytes to stream %d", signed, grew, total)
		}
	}
}

func BenchmarkChunkedSignedDecode(b *testing.B) {
	const total = 64 << 20
	b.SetBytes(total)
	for i := 0; i < b.N; i++ {
		pr, pw := io.Pipe()
		r := streamingRequest(b, modeSigned, total, "", func(seed string) []byte {
			go chunkStream(pw, newChunkSigner(seed, testNow), total, 64<<10)
			return nil
		})
		r.Body = pr
		if _, err := testVerifier().Verify(r); err != nil {
			b.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, r.Body); err != nil || n != total {
			b.Fatal(n, err)
		}
	}
}

func BenchmarkVerifyHeader(b *testing.B) {
	r := signedGet(b, testNow)
	v := testVerifier()
	hdr := r.Header.Clone()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r.Header = hdr
		if _, err := v.Verify(r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkChunkedDecodeOnly measures the decoder alone on a body encoded
// in advance (64 KiB chunks, as SDKs send).
func BenchmarkChunkedDecodeOnly(b *testing.B) {
	data := testData(16 << 20)
	var body []byte
	r := streamingRequest(b, modeSigned, len(data), "", func(seed string) []byte {
		body = chunked(newChunkSigner(seed, testNow), data, 64<<10)
		return body
	})
	hdr := r.Header.Clone()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.Header = hdr.Clone()
		r.Body = nopCloser{bytes.NewReader(body)}
		if _, err := testVerifier().Verify(r); err != nil {
			b.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, r.Body); err != nil || n != int64(len(data)) {
			b.Fatal(n, err)
		}
	}
}

package httpserve

import (
	"io"
	"net/http"
)

// HeldStatus is a ResponseWriter whose status line waits for the first
// byte of the body (or Send). A handler that streams content it fetches
// as it goes (chunks from volume servers) sets its headers and status
// first; if the very first fetch fails, nothing has left yet and the
// client can get that error's own status instead of a 200 or 206 whose
// body stops short.
type HeldStatus struct {
	http.ResponseWriter
	code int
	sent bool
}

// Hold wraps w.
func Hold(w http.ResponseWriter) *HeldStatus { return &HeldStatus{ResponseWriter: w} }

// WriteHeader records code; it is sent with the first Write or Send.
func (h *HeldStatus) WriteHeader(code int) {
	if !h.sent && h.code == 0 {
		h.code = code
	}
}

func (h *HeldStatus) Write(p []byte) (int, error) {
	h.Send()
	return h.ResponseWriter.Write(p)
}

// heldPeek is how much ReadFrom reads before it lets the status go.
const heldPeek = 16 << 10

// ReadFrom keeps the wrapped writer's own ReadFrom (httpserve's large-buffer
// copy, sendfile) for the body: it reads the first bytes itself, and only
// once some arrived sends the status with them and hands the rest on. A
// first read that fails leaves the status held.
func (h *HeldStatus) ReadFrom(r io.Reader) (int64, error) {
	var first int
	if !h.sent {
		buf := make([]byte, heldPeek)
		n, err := io.ReadAtLeast(r, buf, 1)
		if n == 0 {
			if err == io.EOF {
				err = nil
			}
			return 0, err
		}
		if _, werr := h.Write(buf[:n]); werr != nil {
			return 0, werr
		}
		first = n // (with n ≥ 1, ReadAtLeast's error is nil)
	}
	var m int64
	var err error
	if rf, ok := h.ResponseWriter.(io.ReaderFrom); ok {
		m, err = rf.ReadFrom(r)
	} else {
		m, err = io.Copy(h.ResponseWriter, r)
	}
	return int64(first) + m, err
}

// Unwrap lets http.ResponseController reach the wrapped writer.
func (h *HeldStatus) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// Send sends the held status (200 if none was written) if not sent yet.
func (h *HeldStatus) Send() {
	if h.sent {
		return
	}
	h.sent = true
	if h.code == 0 {
		h.code = http.StatusOK
	}
	h.ResponseWriter.WriteHeader(h.code)
}

// Sent reports whether the status line has gone to the client.
func (h *HeldStatus) Sent() bool { return h.sent }

// Retract forgets the held status and deletes the content headers that
// went with it, so that the handler can answer an error instead. It must
// not be called once Sent.
func (h *HeldStatus) Retract() {
	h.code = 0
	for _, k := range []string{"Content-Length", "Content-Range", "Content-Type", "Content-Encoding",
		"Content-Disposition", "Content-Language", "Etag", "Last-Modified", "Accept-Ranges", "Cache-Control", "Expires"} {
		h.Header().Del(k)
	}
}

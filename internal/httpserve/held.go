package httpserve

import "net/http"

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

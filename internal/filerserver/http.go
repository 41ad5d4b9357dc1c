package filerserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kelpfs/kelp/internal/filer"
	"github.com/kelpfs/kelp/internal/httpserve"
)

// metaHeader prefixes request and response headers carrying user metadata.
const metaHeader = "X-Kelp-Meta-"

// routes is a plain handler, not a ServeMux: the mux would answer paths
// with ".." or "//" with a redirect, where the API promises a 400.
// "/healthz" is reserved.
func (s *Server) routes() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
			return
		}
		s.serveHTTP(w, r)
	})
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	p, err := filer.CleanPath(r.URL.Path)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.get(w, r, p)
	case http.MethodPut, http.MethodPost:
		s.put(w, r, p)
	case http.MethodDelete:
		recursive := r.URL.Query().Get("recursive") == "true"
		if err := s.filer.DeleteEntry(r.Context(), p, recursive); err != nil {
			s.writeError(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, HEAD, PUT, POST, DELETE")
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method not allowed"})
	}
}

// followHardLink returns the content of a name of a hard-linked file
// (made through a FUSE mount) under the name's path.
func (s *Server) followHardLink(r *http.Request, e *filer.Entry) (*filer.Entry, error) {
	id := string(e.Xattrs[filer.HardLinkXattr])
	if id == "" || e.IsDir() {
		return e, nil
	}
	c, err := s.filer.FindEntry(r.Context(), filer.HardLinkContentPath(id))
	if err != nil {
		return nil, err
	}
	c.Path = e.Path
	return c, nil
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, p string) {
	ctx := r.Context()
	if r.URL.Query().Get("op") == "quota" {
		s.quota(w, r, p)
		return
	}
	e, err := s.filer.FindEntry(ctx, p)
	if err == nil {
		e, err = s.followHardLink(r, e)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if r.URL.Query().Get("metadata") == "true" {
		writeJSON(w, http.StatusOK, entryJSON(e, true))
		return
	}
	if e.IsDir() {
		s.list(w, r, e)
		return
	}
	h := w.Header()
	for k, v := range e.Meta {
		h.Set(metaHeader+k, v)
	}
	if e.Mode&0o7777 != 0 {
		h.Set("X-Kelp-Mode", strconv.FormatUint(uint64(e.Mode.Perm()), 8))
	}
	if e.Target != "" {
		h.Set("X-Kelp-Symlink-Target", e.Target)
	}
	ctype := e.Mime
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	h.Set("Content-Type", ctype)
	h.Set("Etag", `"`+e.ETag()+`"`)
	h.Set("Accept-Ranges", "bytes")
	rd, err := s.filer.Open(ctx, e)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer rd.Close()
	// ServeContent handles Range, If-Match, If-None-Match, If-Modified-Since
	// and If-Unmodified-Since from the ETag and mtime; the reader streams
	// chunk by chunk and seeks without reading.
	serveContent(w, r, e.Mtime, rd, func(err error) { s.writeError(w, r, err) })
}

// serveContent is http.ServeContent, except that the status line waits for
// the first byte of the body: if the content's first read fails (a volume
// not located yet, every copy down), the client gets that error's status
// instead of a 200 or 206 whose body stops short.
func serveContent(w http.ResponseWriter, r *http.Request, mtime time.Time, content io.ReadSeeker, fail func(error)) {
	hw := httpserve.Hold(w)
	fr := &firstRead{ReadSeeker: content}
	http.ServeContent(hw, r, "", mtime, fr)
	if hw.Sent() {
		return
	}
	if fr.err != nil {
		hw.Retract()
		fail(fr.err)
		return
	}
	hw.Send()
}

// firstRead keeps the error of a first read that returned nothing.
type firstRead struct {
	io.ReadSeeker
	read bool
	err  error
}

func (f *firstRead) Read(p []byte) (int, error) {
	n, err := f.ReadSeeker.Read(p)
	if !f.read && len(p) > 0 {
		f.read = true
		if n == 0 && err != nil && err != io.EOF {
			f.err = err
		}
	}
	return n, err
}

func (s *Server) put(w http.ResponseWriter, r *http.Request, p string) {
	q := r.URL.Query()
	ctx := r.Context()
	op := q.Get("op")
	dirSlash := strings.HasSuffix(r.URL.Path, "/")
	switch {
	case op == "mkdir" || (op == "" && dirSlash && !isMultipart(r)):
		if err := refuseChunkLayout(q, "mkdir"); err != nil {
			s.writeError(w, r, err)
			return
		}
		mode, err := parseMode(q.Get("mode"), 0o755)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := s.filer.Mkdir(ctx, p, mode, false); err != nil {
			s.writeError(w, r, err)
			return
		}
		e, err := s.filer.FindEntry(ctx, p)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusCreated, entryJSON(e, false))
		return
	case op == "rename":
		if err := refuseChunkLayout(q, op); err != nil {
			s.writeError(w, r, err)
			return
		}
		from := q.Get("from")
		if from == "" {
			s.writeError(w, r, fmt.Errorf("%w: rename needs ?from=/source/path", errBadRequest))
			return
		}
		if err := s.filer.Rename(ctx, from, p); err != nil {
			s.writeError(w, r, err)
			return
		}
		e, err := s.filer.FindEntry(ctx, p)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, entryJSON(e, false))
		return
	case op == "quota":
		s.quota(w, r, p)
		return
	case op != "" && op != "append" && op != "write" && op != "truncate":
		s.writeError(w, r, fmt.Errorf("%w: unknown op %q", errBadRequest, op))
		return
	}
	// Whatever is left stores data: its new chunks go where the request says.
	layout, err := parseChunkLayout(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if ctx = withChunkLayout(ctx, layout); ctx != r.Context() {
		r = r.WithContext(ctx)
	}
	if op == "truncate" {
		size, err := strconv.ParseInt(q.Get("size"), 10, 64)
		if err != nil || size < 0 {
			s.writeError(w, r, fmt.Errorf("%w: truncate needs ?size=N (bytes, 0 or more)", errBadRequest))
			return
		}
		e, err := s.filer.Truncate(ctx, p, size)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, entryJSON(e, false))
		return
	}
	s.write(w, r, p, op == "append", dirSlash)
}

// write stores the request body (raw, or the first file of a multipart
// form) at p; with dirSlash, p is a directory and the form's file name is
// appended.
func (s *Server) write(w http.ResponseWriter, r *http.Request, p string, appendOp, dirSlash bool) {
	q := r.URL.Query()
	ctx := r.Context()
	mode, err := parseMode(q.Get("mode"), 0)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	opts := filer.WriteOptions{Mode: mode, Mime: r.Header.Get("Content-Type"), SizeHint: r.ContentLength}
	var body io.Reader = r.Body
	if isMultipart(r) {
		part, release, err := firstFilePart(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		defer release()
		defer part.Close()
		// The form's length bounds its file part's: as a size hint it
		// sizes the chunk buffer to hold the whole part of a small form.
		body, opts.Mime = part, part.Header.Get("Content-Type")
		if dirSlash {
			name := path.Base(strings.ReplaceAll(part.FileName(), `\`, "/"))
			if name == "" || name == "." || name == "/" {
				s.writeError(w, r, fmt.Errorf("%w: multipart file has no name", errBadRequest))
				return
			}
			p = filer.JoinPath(p, name)
		}
	} else if dirSlash {
		s.writeError(w, r, fmt.Errorf("%w: a file path cannot end with '/'", errBadRequest))
		return
	}
	if opts.Mime == "" || opts.Mime == "application/octet-stream" {
		opts.Mime = mime.TypeByExtension(path.Ext(p))
	}
	for k, v := range r.Header {
		if strings.HasPrefix(k, metaHeader) && len(v) > 0 {
			if opts.Meta == nil {
				opts.Meta = make(map[string]string)
			}
			opts.Meta[strings.ToLower(k[len(metaHeader):])] = v[0]
		}
	}
	off := q.Get("offset")
	ifNoneMatch := false
	if im, inm := r.Header.Get("If-Match"), r.Header.Get("If-None-Match"); im != "" || inm != "" {
		// Preconditions of a whole-file write: a compare-and-swap.
		switch {
		case appendOp || off != "":
			s.writeError(w, r, fmt.Errorf("%w: If-Match and If-None-Match apply to whole-file writes, not appends or writes at an offset", errBadRequest))
			return
		case inm != "" && strings.TrimSpace(inm) != "*":
			s.writeError(w, r, fmt.Errorf("%w: If-None-Match on a write takes only *", errBadRequest))
			return
		case im != "" && inm != "":
			s.writeError(w, r, fmt.Errorf("%w: If-Match and If-None-Match together", errBadRequest))
			return
		case inm != "":
			opts.Exclusive, ifNoneMatch = true, true
		default:
			tag, err := entityTag(im)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			opts.IfMatch = tag
		}
	}
	var e *filer.Entry
	switch {
	case appendOp:
		e, err = s.filer.Append(ctx, p, body, opts)
	case off != "":
		n, perr := strconv.ParseInt(off, 10, 64)
		if perr != nil || n < 0 {
			s.writeError(w, r, fmt.Errorf("%w: bad offset %q", errBadRequest, off))
			return
		}
		e, err = s.filer.WriteAt(ctx, p, n, body, opts)
	default:
		e, err = s.filer.WriteFile(ctx, p, body, opts)
		if ifNoneMatch && errors.Is(err, filer.ErrExists) {
			err = fmt.Errorf("%w: %s exists (If-None-Match: *)", filer.ErrChanged, p)
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Etag", `"`+e.ETag()+`"`)
	writeJSON(w, http.StatusCreated, entryJSON(e, false))
}

// entityTag reads the one entity tag of an If-Match header: "*" or a
// quoted strong tag (an unquoted one is taken as is). A weak tag never
// matches a write's strong comparison, so it is refused rather than
// failing every time.
func entityTag(h string) (string, error) {
	h = strings.TrimSpace(h)
	switch {
	case h == "*":
		return h, nil
	case strings.HasPrefix(h, "W/"):
		return "", fmt.Errorf("%w: If-Match %s: a weak entity tag cannot match a write", errBadRequest, h)
	case strings.Contains(h, ","):
		return "", fmt.Errorf("%w: If-Match %s: one entity tag only", errBadRequest, h)
	}
	if len(h) >= 2 && h[0] == '"' && h[len(h)-1] == '"' {
		h = h[1 : len(h)-1]
	}
	if h == "" || strings.ContainsAny(h, "\"\x00") {
		return "", fmt.Errorf("%w: If-Match %q is not an entity tag", errBadRequest, h)
	}
	return h, nil
}

func isMultipart(r *http.Request) bool {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mt == "multipart/form-data"
}

// firstFilePart returns the first part of a multipart form that carries a
// file (a filename), streaming: nothing is buffered to memory or disk beyond
// one read buffer. The form is read through a 64 KiB buffer (returned to its
// pool by release, once the part is consumed): the multipart reader reads
// 4 KiB at a time, which straight from the connection cost a read syscall
// each, where a PUT's body is read in chunk-sized reads.
func firstFilePart(r *http.Request) (*filePart, func(), error) {
	release := func() {}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return nil, release, fmt.Errorf("%w: not a multipart/form-data body with a boundary", errBadRequest)
	}
	br := formReaders.Get().(*bufio.Reader)
	br.Reset(r.Body)
	release = func() {
		br.Reset(nil)
		formReaders.Put(br)
	}
	mr := multipart.NewReader(br, params["boundary"])
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return nil, release, fmt.Errorf("%w: multipart form has no file", errBadRequest)
		}
		if err != nil {
			return nil, release, fmt.Errorf("%w: %v", errBadRequest, err)
		}
		if part.FileName() != "" || part.FormName() == "file" {
			return &filePart{Part: part}, release, nil
		}
		part.Close()
	}
}

// formReaders are the read buffers of multipart uploads.
var formReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

func parseMode(s string, def uint32) (osMode, error) {
	if s == "" {
		return osMode(def), nil
	}
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 0o7777 {
		return 0, fmt.Errorf("%w: mode %q is not octal permissions", errBadRequest, s)
	}
	return osMode(m), nil
}

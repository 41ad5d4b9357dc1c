package volumeserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/volume"
)

// maxNeedleData is the largest body one needle can hold (its size field is 32 bits).
const maxNeedleData = 1<<32 - 1

// spoolInMemory is how much of a body of unknown length is kept in memory
// before the rest is spooled to a temporary file next to the volumes.
const spoolInMemory = 1 << 20

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /status", s.handleStatus)
	mux.HandleFunc("GET /ec/shard", s.handleShardRead)
	mux.HandleFunc("GET /ec/routes", s.handleRoutes)
	mux.HandleFunc("GET /ec/shards", s.handleShardsRead)
	mux.HandleFunc("GET /ec/journal", s.handleJournalRead)
	mux.HandleFunc("GET /sync/index", s.handleSyncIndex)
	mux.HandleFunc("GET /sync/needle", s.handleSyncNeedle)
	mux.HandleFunc("POST /sync/pull", s.handleSyncPull)
	mux.HandleFunc("/", s.handleFile)
	return mux
}

func (s *Server) handleFile(w http.ResponseWriter, r *http.Request) {
	id, err := fid.Parse(strings.TrimPrefix(r.URL.Path, "/"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.handleRead(w, r, id)
	case http.MethodPut, http.MethodPost:
		s.handleWrite(w, r, id)
	case http.MethodDelete:
		s.handleDelete(w, r, id)
	default:
		w.Header().Set("Allow", "GET, HEAD, PUT, POST, DELETE")
		writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed")
	}
}

func (s *Server) volumeFor(w http.ResponseWriter, id fid.FileID) (*volume.Volume, bool) {
	v, ok := s.store.Volume(id.Volume)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("volume %d not found on %s", id.Volume, s.URL()))
	}
	return v, ok
}

func (s *Server) handleRead(w http.ResponseWriter, r *http.Request, id fid.FileID) {
	if _, ok := s.store.Volume(id.Volume); !ok {
		if ev, ok := s.store.EcVolume(id.Volume); ok {
			s.handleECRead(w, r, id, ev)
			return
		}
	}
	v, ok := s.volumeFor(w, id)
	if !ok {
		return
	}
	obj, err := v.Read(id.Key, id.Cookie)
	if err != nil {
		s.writeDomainError(w, r, err)
		return
	}
	defer obj.Close()
	if r.Header.Get(client.HeaderReaderAuthenticates) != "" || !readsToEnd(r.Header.Get("Range"), obj.Size) {
		obj.SkipChecksum()
	}
	h := w.Header()
	h.Set("ETag", `"`+obj.ETag+`"`)
	h.Set("Accept-Ranges", "bytes")
	ctype := obj.Meta.Mime
	if ctype == "" {
		ctype = mime.TypeByExtension(filepath.Ext(obj.Meta.Name))
	}
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	h.Set("Content-Type", ctype)
	if obj.Meta.Name != "" {
		disposition := "inline"
		if dl, _ := strconv.ParseBool(r.URL.Query().Get("dl")); dl {
			disposition = "attachment"
		}
		h.Set("Content-Disposition", mime.FormatMediaType(disposition, map[string]string{"filename": obj.Meta.Name}))
	}
	if data := obj.Bytes(); data != nil && isPlainRead(r) {
		// The common case, a whole small needle already in memory: one write,
		// none of ServeContent's header parsing.
		h.Set("Last-Modified", obj.ModTime.UTC().Format(http.TimeFormat))
		h.Set("Content-Length", strconv.Itoa(len(data)))
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			w.Write(data)
		}
		return
	}
	// ServeContent implements Range, If-None-Match, If-Modified-Since, If-Match and
	// If-Unmodified-Since against the ETag and modification time set above.
	http.ServeContent(w, r, "", obj.ModTime, obj)
}

// isPlainRead reports whether r asks for the whole needle unconditionally.
// readsToEnd reports whether a read with Range header rng (maybe "") of a
// needle of size bytes reads it from its start to its end, the only read
// whose checksums can be checked. Any other range would have its bytes from
// the start hashed (a range from 0, as the mount's first fetch of a chunk)
// for a check that never comes.
func readsToEnd(rng string, size int64) bool {
	if rng == "" {
		return true
	}
	last, ok := strings.CutPrefix(rng, "bytes=0-")
	if !ok {
		return false
	}
	if last == "" {
		return true
	}
	n, err := strconv.ParseInt(last, 10, 64)
	return err == nil && n >= size-1
}

func isPlainRead(r *http.Request) bool {
	h := r.Header
	return h.Get("Range") == "" && h.Get("If-None-Match") == "" && h.Get("If-Modified-Since") == "" &&
		h.Get("If-Match") == "" && h.Get("If-Unmodified-Since") == ""
}

// unhurriedQuery lets a write's fsync wait a little to be shared
// (volume.WithUnhurriedSync); the client sends it alone.
const unhurriedQuery = "sync=unhurried"

func (s *Server) handleWrite(w http.ResponseWriter, r *http.Request, id fid.FileID) {
	v, ok := s.volumeFor(w, id)
	if !ok {
		return
	}
	replicas, err := s.replicas(r.Context(), r, v, id.Volume)
	if err != nil {
		s.writeDomainError(w, r, err)
		return
	}
	// Forwarding to replicas needs the body more than once, so spool it.
	up, err := s.readUpload(r, len(replicas.urls) > 0)
	if err != nil {
		s.writeDomainError(w, r, err)
		return
	}
	defer up.cleanup()
	meta := needle.Meta{Key: id.Key, Cookie: id.Cookie, Name: up.name, Mime: up.mime, LastModified: up.modTime.Unix()}
	ctx := r.Context()
	if q := r.URL.RawQuery; q == unhurriedQuery || q != "" && r.URL.Query().Get("sync") == "unhurried" {
		ctx = volume.WithUnhurriedSync(ctx) // replicas are asked the same (forwardWrite)
	}
	var res volume.WriteResult
	err = s.fanOut(ctx, id.Volume, replicas,
		func() (err error) {
			body := up.body
			if up.at != nil {
				body = io.NewSectionReader(up.at, 0, up.size)
			}
			res, err = v.Write(ctx, meta, body, up.size)
			return err
		},
		func(ctx context.Context, replica string) error { return s.forwardWrite(ctx, replica, id, up, up.at) })
	if err != nil {
		s.writeDomainError(w, r, err)
		return
	}
	w.Header()["Etag"] = []string{`"` + res.ETag + `"`}
	writeUploadAnswer(w, uploadResponse{Name: up.name, Size: res.Size, ETag: res.ETag})
}

// writeUploadAnswer is writeJSON(w, 201, ans) without reflection for the
// common answer, one without a name whose ETag needs no escaping: the same
// bytes (TestUploadAnswerSameAsJSON).
func writeUploadAnswer(w http.ResponseWriter, ans uploadResponse) {
	if ans.Name != "" || !jsonPlain(ans.ETag) {
		writeJSON(w, http.StatusCreated, ans)
		return
	}
	b := make([]byte, 0, 48+len(ans.ETag))
	b = append(b, `{"size":`...)
	b = strconv.AppendInt(b, ans.Size, 10)
	b = append(b, `,"eTag":"`...)
	b = append(b, ans.ETag...)
	b = append(b, "\"}\n"...)
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(http.StatusCreated)
	w.Write(b)
}

// jsonPlain: s is written by encoding/json as it is, between quotes.
func jsonPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

type uploadResponse struct {
	Name string `json:"name,omitempty"`
	Size int64  `json:"size"`
	ETag string `json:"eTag"`
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request, id fid.FileID) {
	if _, ok := s.store.Volume(id.Volume); !ok {
		if ev, ok := s.store.EcVolume(id.Volume); ok {
			s.handleECDelete(w, r, id, ev)
			return
		}
	}
	if _, ok := s.store.Volume(id.Volume); !ok && isReplicaRequest(r) {
		// The primary takes a replica's 404 as "this copy never had the
		// needle" and reports the delete done; a server without the whole
		// volume (a copy still being moved here, say) cannot vouch for that.
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("volume %d not found on %s", id.Volume, s.URL()))
		return
	}
	v, ok := s.volumeFor(w, id)
	if !ok {
		return
	}
	replicas, err := s.replicas(r.Context(), r, v, id.Volume)
	if err != nil {
		s.writeDomainError(w, r, err)
		return
	}
	var freed int64
	err = s.fanOut(r.Context(), id.Volume, replicas,
		func() (err error) { freed, err = v.Delete(r.Context(), id.Key, id.Cookie); return err },
		func(ctx context.Context, replica string) error { return s.forwardDelete(ctx, replica, id) })
	if err != nil {
		s.writeDomainError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]int64{"size": freed})
}

// upload is a request body ready to be appended to a volume: its exact size is
// known, so the volume can write the needle header before streaming the data.
type upload struct {
	body    io.Reader
	at      io.ReaderAt // set when the body was spooled and can be read again
	size    int64
	name    string
	mime    string
	modTime time.Time
	cleanup func()
}

// readUpload extracts the file from a raw body or from the first file part of a
// multipart form. A raw body with a Content-Length streams straight through;
// anything of unknown length, or anything that must be read more than once
// (mustSpool), is spooled: memory first, then a temporary file.
func (s *Server) readUpload(r *http.Request, mustSpool bool) (*upload, error) {
	up := &upload{cleanup: func() {}, modTime: time.Now()}
	var query url.Values // parsed once; most writes have no query at all
	if r.URL.RawQuery != "" {
		query = r.URL.Query()
	}
	if ts := query.Get("ts"); ts != "" {
		sec, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || sec < 0 {
			return nil, badRequest("ts must be unix seconds, got %q", ts)
		}
		up.modTime = time.Unix(sec, 0)
	}
	rawType := r.Header.Get("Content-Type")
	// Only a form is unwrapped; any other type, multipart/related included, is
	// stored as it came. The prefix test spares the common case the parse.
	if strings.HasPrefix(rawType, "multipart/form-data") {
		_, params, _ := mime.ParseMediaType(rawType)
		if params["boundary"] == "" {
			return nil, badRequest("multipart body without boundary")
		}
		mr, err := r.MultipartReader()
		if err != nil {
			return nil, badRequest("multipart body: %v", err)
		}
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				return nil, badRequest("multipart body has no file part")
			}
			if err != nil {
				return nil, badRequest("multipart body: %v", err)
			}
			if part.FileName() == "" && part.FormName() != "file" {
				part.Close()
				continue
			}
			up.name = part.FileName()
			up.mime = part.Header.Get("Content-Type")
			if up.mime == "application/octet-stream" {
				up.mime = ""
			}
			return up, s.spool(up, part)
		}
	}
	if rawType != "" && rawType != "application/octet-stream" {
		up.mime = rawType
	}
	if name := query.Get("name"); name != "" {
		up.name = name
	}
	if r.ContentLength > s.cfg.MaxUploadSize {
		return nil, errTooLarge(r.ContentLength, s.cfg.MaxUploadSize)
	}
	if r.ContentLength >= 0 && !mustSpool {
		up.body, up.size = r.Body, r.ContentLength
		return up, nil
	}
	return up, s.spool(up, r.Body)
}

// spool reads src to its end so its size is known, keeping small bodies in memory.
func (s *Server) spool(up *upload, src io.Reader) error {
	head := make([]byte, 0, 64<<10)
	buf := bytes.NewBuffer(head)
	n, err := io.CopyN(buf, src, spoolInMemory+1)
	if err != nil && err != io.EOF {
		return badRequest("reading body: %v", err)
	}
	if n <= spoolInMemory {
		br := bytes.NewReader(buf.Bytes())
		up.body, up.at, up.size = br, br, n
		return nil
	}
	f, err := os.CreateTemp(s.cfg.Disks[0].Dir, ".upload-*")
	if err != nil {
		return fmt.Errorf("volumeserver: spool upload: %w", err)
	}
	up.cleanup = func() { f.Close(); os.Remove(f.Name()) }
	total, err := io.Copy(f, io.MultiReader(buf, io.LimitReader(src, s.cfg.MaxUploadSize+1-n)))
	if err != nil {
		up.cleanup()
		return fmt.Errorf("volumeserver: spool upload: %w", err)
	}
	if total > s.cfg.MaxUploadSize {
		up.cleanup()
		return errTooLarge(total, s.cfg.MaxUploadSize)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		up.cleanup()
		return fmt.Errorf("volumeserver: spool upload: %w", err)
	}
	up.body, up.at, up.size = f, f, total
	return nil
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"url":        s.URL(),
		"publicUrl":  s.cfg.PublicURL,
		"dataCenter": s.cfg.DataCenter,
		"rack":       s.cfg.Rack,
		"disks":      s.store.Status(),
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

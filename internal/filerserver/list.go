package filerserver

import (
	"fmt"
	"html/template"
	"mime/multipart"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kelpfs/kelp/internal/filer"
)

type osMode = os.FileMode

type filePart struct{ *multipart.Part }

// entryInfo is an entry as the HTTP API shows it.
type entryInfo struct {
	Name   string            `json:"name"`
	Path   string            `json:"path,omitempty"`
	IsDir  bool              `json:"isDir"`
	Size   int64             `json:"size"`
	Mtime  time.Time         `json:"mtime"`
	Mode   string            `json:"mode"`
	Mime   string            `json:"mime,omitempty"`
	ETag   string            `json:"etag,omitempty"`
	Target string            `json:"symlinkTarget,omitempty"`
	Meta   map[string]string `json:"meta,omitempty"`
	Chunks int               `json:"chunks,omitempty"`
}

func entryJSON(e *filer.Entry, full bool) entryInfo {
	info := entryInfo{
		Name: e.Name(), IsDir: e.IsDir(), Size: e.Size, Mtime: e.Mtime,
		Mode: "0" + strconv.FormatUint(uint64(e.Mode.Perm()), 8), Mime: e.Mime, Target: e.Target,
	}
	if !e.IsDir() {
		info.ETag = e.ETag()
	}
	if full {
		info.Path, info.Meta, info.Chunks = e.Path, e.Meta, len(e.Chunks)
	}
	return info
}

type listing struct {
	Path         string      `json:"path"`
	Entries      []entryInfo `json:"entries"`
	LastFileName string      `json:"lastFileName,omitempty"`
	More         bool        `json:"more"`
}

// list answers a directory GET: JSON when the client accepts it, else a
// plain HTML page. ?limit=, ?lastFileName= and ?prefix= page through it.
func (s *Server) list(w http.ResponseWriter, r *http.Request, dir *filer.Entry) {
	q := r.URL.Query()
	limit := 1000
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			s.writeError(w, r, errBadRequestf("bad limit %q", v))
			return
		}
		limit = min(n, 10000)
	}
	entries, more, err := s.filer.ListEntries(r.Context(), dir.Path, filer.ListOptions{
		StartAfter: q.Get("lastFileName"), Prefix: q.Get("prefix"), Limit: limit,
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := listing{Path: dir.Path, Entries: make([]entryInfo, 0, len(entries)), More: more}
	for _, e := range entries {
		out.Entries = append(out.Entries, entryJSON(e, false))
	}
	if len(entries) > 0 {
		out.LastFileName = entries[len(entries)-1].Name()
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, out)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if r.Method == http.MethodHead {
		return
	}
	if err := listTemplate.Execute(w, out); err != nil {
		s.log.Debug("filer: writing listing", "err", err)
	}
}

func wantsJSON(r *http.Request) bool {
	a := r.Header.Get("Accept")
	return strings.Contains(a, "application/json") && !strings.Contains(a, "text/html")
}

func errBadRequestf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadRequest, fmt.Sprintf(format, args...))
}

var listTemplate = template.Must(template.New("list").Funcs(template.FuncMap{
	"join": func(dir, name string) string { return filer.JoinPath(dir, name) },
}).Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{{.Path}}</title></head>
<body><h1>{{.Path}}</h1>
<table>
<tr><th>Name</th><th>Size</th><th>Modified</th><th>Mode</th></tr>
{{range .Entries}}<tr><td><a href="{{join $.Path .Name}}{{if .IsDir}}/{{end}}">{{.Name}}{{if .IsDir}}/{{end}}</a></td><td>{{.Size}}</td><td>{{.Mtime.UTC.Format "2006-01-02 15:04:05"}}</td><td>{{.Mode}}</td></tr>
{{end}}</table>
{{if .More}}<p><a href="?lastFileName={{.LastFileName}}">next page</a></p>{{end}}
</body></html>
`))

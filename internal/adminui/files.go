package adminui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kelpfs/kelp/internal/security"
)

// The filer browser and the buckets page talk to one filer over its HTTP
// API (docs/filer.md): Config.Filer names it (`kelp server` its own filer,
// `kelp master --admin.filer`). Buckets are the directories under the S3
// gateway's bucket root, as the gateway sees them.

type filerEntry struct {
	Name  string    `json:"name"`
	IsDir bool      `json:"isDir"`
	Size  uint64    `json:"size"`
	Mtime time.Time `json:"mtime"`
	Mime  string    `json:"mime"`
	Path  string    `json:"-"`
}

type filerListing struct {
	Path    string       `json:"path"`
	Entries []filerEntry `json:"entries"`
	More    bool         `json:"more"`
}

// errFilerNotFound is a 404 from the filer, errFilerChanged a 412 (a
// conditional write that another writer overtook).
var (
	errFilerNotFound = errors.New("not found")
	errFilerChanged  = errors.New("changed meanwhile")
)

// filerHTTP is created on first use: the process's TLS settings are known
// by then.
var filerHTTP = sync.OnceValue(func() *http.Client {
	return &http.Client{Timeout: 10 * time.Minute, Transport: &http.Transport{
		Proxy:           nil,
		TLSClientConfig: security.Process().ClientConfig(), // nil: TLS off
	}}
})

func (u *UI) filerAddr() string {
	if u.cfg.Filer == nil {
		return ""
	}
	return u.cfg.Filer()
}

// cleanPath checks a path given by a client: absolute, no "." or ".."
// component, no NUL, inside the browser's root. The answer ends in "/" for
// a directory when p did.
func (u *UI) cleanPath(p string) (string, error) {
	if p == "" {
		p = "/"
	}
	if !strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("path %q: want an absolute path", p)
	}
	for _, c := range strings.Split(p, "/") {
		if c == "." || c == ".." {
			return "", fmt.Errorf("path %q: no . or .. components", p)
		}
	}
	clean := path.Clean(p)
	// The filer's system directory holds the S3 secret keys (and the KMS's
	// records): the browser does not reach it.
	if clean == "/.kelp" || strings.HasPrefix(clean, "/.kelp/") {
		return "", fmt.Errorf("path %q: the filer's system directory /.kelp is not browsable", p)
	}
	root := u.cfg.FilerRoot
	if root != "/" && clean != root && !strings.HasPrefix(clean, root+"/") {
		return "", fmt.Errorf("path %q is outside the filer root %s", p, root)
	}
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean, nil
}

// validName is one path component.
func validName(n string) error {
	if n == "" || n == "." || n == ".." || strings.ContainsAny(n, "/\x00") || len(n) > 255 {
		return fmt.Errorf("name %q: want 1 to 255 bytes without '/'", n)
	}
	return nil
}

func escapePath(p string) string {
	return (&url.URL{Path: p}).EscapedPath()
}

// filerDo sends a request to the filer; a non-2xx answer is an error with
// the filer's message.
func (u *UI) filerDo(ctx context.Context, method, p, query string, body io.Reader, hdr http.Header) (*http.Response, error) {
	addr := u.filerAddr()
	if addr == "" {
		return nil, errors.New("no filer configured (kelp master --admin.filer=host:port)")
	}
	target := security.URL(addr) + escapePath(p)
	if query != "" {
		target += "?" + query
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if u.cfg.FilerToken != "" {
		req.Header.Set("Authorization", "Bearer "+u.cfg.FilerToken)
	}
	resp, err := filerHTTP().Do(req)
	if err != nil {
		return nil, fmt.Errorf("filer %s: %w", addr, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(b))
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		switch resp.StatusCode {
		case http.StatusNotFound:
			return nil, fmt.Errorf("%w: %s", errFilerNotFound, msg)
		case http.StatusPreconditionFailed:
			return nil, fmt.Errorf("%w: %s", errFilerChanged, msg)
		}
		return nil, fmt.Errorf("filer answered %s: %s", resp.Status, msg)
	}
	return resp, nil
}

func (u *UI) list(ctx context.Context, dir string) (filerListing, error) {
	var l filerListing
	if !strings.HasSuffix(dir, "/") {
		dir += "/"
	}
	resp, err := u.filerDo(ctx, http.MethodGet, dir, "limit=10000", nil, http.Header{"Accept": {"application/json"}})
	if err != nil {
		return l, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return l, fmt.Errorf("filer listing of %s: %w", dir, err)
	}
	for i := range l.Entries {
		l.Entries[i].Path = path.Join(dir, l.Entries[i].Name)
	}
	return l, nil
}

func (u *UI) fail(w http.ResponseWriter, r *http.Request, id identity, status int, err error) {
	if errors.Is(err, errFilerNotFound) {
		status = http.StatusNotFound
	}
	u.render(w, r, status, "error", id, http.StatusText(status), map[string]any{"Message": err.Error()})
}

type crumb struct{ Name, Path string }

func crumbs(dir string) []crumb {
	out := []crumb{{Name: "/", Path: "/"}}
	p := ""
	for _, c := range strings.Split(strings.Trim(dir, "/"), "/") {
		if c == "" {
			continue
		}
		p += "/" + c
		out = append(out, crumb{Name: c, Path: p + "/"})
	}
	return out
}

func (u *UI) filesPage(w http.ResponseWriter, r *http.Request, id identity) {
	dir, err := u.cleanPath(r.URL.Query().Get("path"))
	if err != nil {
		u.fail(w, r, id, http.StatusBadRequest, err)
		return
	}
	if !strings.HasSuffix(dir, "/") {
		dir += "/"
	}
	l, err := u.list(r.Context(), dir)
	if err != nil {
		u.fail(w, r, id, http.StatusBadGateway, err)
		return
	}
	l.Entries = slices.DeleteFunc(l.Entries, func(e filerEntry) bool { return e.Path == "/.kelp" }) // not browsable
	u.render(w, r, http.StatusOK, "files", id, "Files", map[string]any{
		"Dir": dir, "Entries": l.Entries, "More": l.More, "Crumbs": crumbs(dir), "Parent": path.Dir(strings.TrimSuffix(dir, "/")),
	})
}

func (u *UI) download(w http.ResponseWriter, r *http.Request, id identity) {
	p, err := u.cleanPath(r.URL.Query().Get("path"))
	if err != nil || strings.HasSuffix(p, "/") {
		u.fail(w, r, id, http.StatusBadRequest, cmpErr(err, "a file path, not a directory"))
		return
	}
	resp, err := u.filerDo(r.Context(), http.MethodGet, p, "", nil, nil)
	if err != nil {
		u.fail(w, r, id, http.StatusBadGateway, err)
		return
	}
	defer resp.Body.Close()
	h := w.Header()
	for _, k := range []string{"Content-Type", "Content-Length", "Last-Modified", "Etag"} {
		if v := resp.Header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	h.Set("Content-Disposition", "attachment; filename*=UTF-8''"+url.PathEscape(path.Base(p)))
	io.Copy(w, resp.Body)
}

func cmpErr(err error, msg string) error {
	if err != nil {
		return err
	}
	return errors.New(msg)
}

// backTo sends the browser back to a directory's page.
func backTo(w http.ResponseWriter, r *http.Request, dir string) {
	if !strings.HasSuffix(dir, "/") {
		dir += "/"
	}
	http.Redirect(w, r, "/files?path="+url.QueryEscape(dir), http.StatusSeeOther)
}

func (u *UI) formDir(r *http.Request) (string, error) {
	d, err := u.cleanPath(r.FormValue("dir"))
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(d, "/"), nil
}

func (u *UI) upload(w http.ResponseWriter, r *http.Request, id identity) {
	dir, err := u.formDir(r)
	if err != nil {
		u.fail(w, r, id, http.StatusBadRequest, err)
		return
	}
	if r.MultipartForm == nil || len(r.MultipartForm.File["file"]) == 0 {
		u.fail(w, r, id, http.StatusBadRequest, errors.New("choose a file to upload"))
		return
	}
	for _, fh := range r.MultipartForm.File["file"] {
		name := path.Base(strings.ReplaceAll(fh.Filename, "\\", "/"))
		if err := validName(name); err != nil {
			u.fail(w, r, id, http.StatusBadRequest, err)
			return
		}
		f, err := fh.Open()
		if err != nil {
			u.fail(w, r, id, http.StatusBadRequest, err)
			return
		}
		hdr := http.Header{}
		if ct := fh.Header.Get("Content-Type"); ct != "" && ct != "application/octet-stream" {
			hdr.Set("Content-Type", ct)
		}
		resp, err := u.filerDo(r.Context(), http.MethodPut, path.Join(dir, name), "", f, hdr)
		f.Close()
		if err != nil {
			u.fail(w, r, id, http.StatusBadGateway, err)
			return
		}
		resp.Body.Close()
		u.log.Info("admin upload", "user", id.user, "path", path.Join(dir, name), "size", fh.Size)
	}
	backTo(w, r, dir)
}

func (u *UI) mkdir(w http.ResponseWriter, r *http.Request, id identity) {
	dir, err := u.formDir(r)
	if err == nil {
		err = validName(r.FormValue("name"))
	}
	if err != nil {
		u.fail(w, r, id, http.StatusBadRequest, err)
		return
	}
	resp, err := u.filerDo(r.Context(), http.MethodPost, path.Join(dir, r.FormValue("name")), "op=mkdir", nil, nil)
	if err != nil {
		u.fail(w, r, id, http.StatusBadGateway, err)
		return
	}
	resp.Body.Close()
	backTo(w, r, dir)
}

func (u *UI) rename(w http.ResponseWriter, r *http.Request, id identity) {
	from, err := u.cleanPath(r.FormValue("path"))
	if err == nil {
		err = validName(r.FormValue("name"))
	}
	if err == nil && strings.TrimSuffix(from, "/") == u.cfg.FilerRoot {
		err = errors.New("the root cannot be renamed")
	}
	if err != nil {
		u.fail(w, r, id, http.StatusBadRequest, err)
		return
	}
	from = strings.TrimSuffix(from, "/")
	dir := path.Dir(from)
	resp, err := u.filerDo(r.Context(), http.MethodPost, path.Join(dir, r.FormValue("name")), "op=rename&from="+url.QueryEscape(from), nil, nil)
	if err != nil {
		u.fail(w, r, id, http.StatusBadGateway, err)
		return
	}
	resp.Body.Close()
	backTo(w, r, dir)
}

func (u *UI) remove(w http.ResponseWriter, r *http.Request, id identity) {
	p, err := u.cleanPath(r.FormValue("path"))
	if err == nil && strings.TrimSuffix(p, "/") == u.cfg.FilerRoot {
		err = errors.New("the root cannot be deleted")
	}
	if err != nil {
		u.fail(w, r, id, http.StatusBadRequest, err)
		return
	}
	p = strings.TrimSuffix(p, "/")
	q := ""
	if r.FormValue("recursive") != "" {
		q = "recursive=true"
	}
	resp, err := u.filerDo(r.Context(), http.MethodDelete, p, q, nil, nil)
	if err != nil {
		u.fail(w, r, id, http.StatusBadGateway, err)
		return
	}
	resp.Body.Close()
	u.log.Info("admin delete", "user", id.user, "path", p)
	backTo(w, r, path.Dir(p))
}

// bucketName is S3's rule for new buckets.
var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

func (u *UI) bucketsPage(w http.ResponseWriter, r *http.Request, id identity) {
	l, err := u.list(r.Context(), u.cfg.BucketRoot)
	if err != nil && !errors.Is(err, errFilerNotFound) {
		u.fail(w, r, id, http.StatusBadGateway, err)
		return
	}
	var buckets []filerEntry
	for _, e := range l.Entries {
		if e.IsDir {
			buckets = append(buckets, e)
		}
	}
	rows, err := u.bucketDetails(r.Context(), buckets)
	detailErr := ""
	if err != nil { // the list still shows, without the details
		detailErr = err.Error()
		rows = make([]bucketInfo, len(buckets))
		for i, b := range buckets {
			rows[i] = bucketInfo{filerEntry: b}
		}
	}
	u.render(w, r, http.StatusOK, "buckets", id, "Buckets", map[string]any{"Buckets": rows, "Root": u.cfg.BucketRoot,
		"DetailError": detailErr, "WalkLimit": usageWalkLimit})
}

func (u *UI) createBucket(w http.ResponseWriter, r *http.Request, id identity) {
	name := r.FormValue("name")
	if !bucketName.MatchString(name) || strings.Contains(name, "..") {
		u.fail(w, r, id, http.StatusBadRequest, fmt.Errorf("bucket name %q: 3 to 63 of a-z 0-9 . -, starting and ending with a letter or digit", name))
		return
	}
	p := path.Join(u.cfg.BucketRoot, name)
	if resp, err := u.filerDo(r.Context(), http.MethodGet, p, "metadata=true", nil, nil); err == nil {
		resp.Body.Close()
		u.fail(w, r, id, http.StatusConflict, fmt.Errorf("bucket %s exists", name))
		return
	}
	resp, err := u.filerDo(r.Context(), http.MethodPost, p, "op=mkdir", nil, nil)
	if err != nil {
		u.fail(w, r, id, http.StatusBadGateway, err)
		return
	}
	resp.Body.Close()
	u.log.Info("admin bucket created", "user", id.user, "bucket", name)
	http.Redirect(w, r, "/buckets", http.StatusSeeOther)
}

// deleteBucket deletes an empty bucket; the form repeats the name as its
// confirmation.
func (u *UI) deleteBucket(w http.ResponseWriter, r *http.Request, id identity) {
	name := r.FormValue("name")
	if !bucketName.MatchString(name) {
		u.fail(w, r, id, http.StatusBadRequest, fmt.Errorf("bucket name %q", name))
		return
	}
	if r.FormValue("confirm") != name {
		u.fail(w, r, id, http.StatusBadRequest, errors.New("type the bucket's name to confirm its deletion"))
		return
	}
	resp, err := u.filerDo(r.Context(), http.MethodDelete, path.Join(u.cfg.BucketRoot, name), "", nil, nil)
	if err != nil {
		u.fail(w, r, id, http.StatusConflict, fmt.Errorf("delete bucket %s (a bucket must be empty): %w", name, err))
		return
	}
	resp.Body.Close()
	u.log.Info("admin bucket deleted", "user", id.user, "bucket", name)
	http.Redirect(w, r, "/buckets", http.StatusSeeOther)
}

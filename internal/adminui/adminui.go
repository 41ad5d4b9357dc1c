package adminui

import (
	"context"
	"embed"
	"errors"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/kelpfs/kelp/internal/master"
	"github.com/kelpfs/kelp/internal/topology"
)

// Source is what the UI shows and acts on: the master it is mounted on
// (*master.Server), or an in-memory fake in tests and benchmarks.
type Source interface {
	HTTPAddr() string
	// ClusterStatus asks every master for its role (short timeouts).
	ClusterStatus(ctx context.Context) master.ClusterStatus
	// TopologyStatus is the master's topology tree with disks and volumes.
	TopologyStatus() topology.Status
	// EcVolumes lists the erasure-coded volumes with their shards.
	EcVolumes() []topology.EcVolumeStatus
	// PulseSeconds is the volume servers' heartbeat interval.
	PulseSeconds() float64
	// RunShell runs an admin shell script against the cluster as owner.
	RunShell(ctx context.Context, owner string, out io.Writer, script string) error
	// GrowVolumes creates a collection's volumes (replication "" = its
	// default) and returns their ids.
	GrowVolumes(ctx context.Context, collection, replication string) ([]uint32, error)
}

// Config configures the UI.
type Config struct {
	// User and Password, or Credential, are required.
	User, Password string
	// Credential, instead of User and Password, gives a user and a bcrypt
	// hash of its password, looked up on every check: the credential a
	// master generated and committed through Raft (nothing while none).
	Credential func() (user, hash string)
	Source     Source
	Logger     *slog.Logger
	// Filer returns the HTTP host:port of a filer for the filer browser
	// and the buckets page ("" or nil: those pages say there is none).
	Filer func() string
	// FilerGRPC returns the filer's gRPC host:port (bucket versioning,
	// quotas and usage); nil or "" means Filer's port + 10000 (pb.GRPCPort).
	FilerGRPC func() string
	// FilerToken is the access token shown to the filer ("" none: the
	// filer needs none, or mutual TLS identifies the master).
	FilerToken string
	// FilerRoot is the top the filer browser may reach; default "/".
	FilerRoot string
	// BucketRoot is the S3 gateway's bucket directory; default /buckets.
	BucketRoot string
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// UI is the admin web UI, an http.Handler.
type UI struct {
	cfg  Config
	log  *slog.Logger
	auth *auth
	mux  *http.ServeMux
	jobs jobs
}

//go:embed templates/*.html static/*
var files embed.FS

var pages = template.Must(template.New("").Funcs(funcs).ParseFS(files, "templates/*.html"))

// New builds the UI.
func New(cfg Config) (*UI, error) {
	if (cfg.User == "" || cfg.Password == "") && cfg.Credential == nil {
		return nil, errors.New("adminui: a user and a password (or Config.Credential) are required")
	}
	if cfg.Source == nil {
		return nil, errors.New("adminui: Config.Source is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Password != "" {
		cfg.Credential = nil // a given password wins
	}
	cfg.FilerRoot = path.Clean("/" + cfg.FilerRoot)
	if cfg.BucketRoot == "" {
		cfg.BucketRoot = "/buckets"
	}
	name := "kelp_admin_" + strings.NewReplacer(":", "_", ".", "_", "[", "", "]", "").Replace(cfg.Source.HTTPAddr())
	u := &UI{cfg: cfg, log: cfg.Logger.With("service", "adminui"), auth: newAuth(cfg.User, cfg.Password, cfg.Credential, name)}
	u.jobs.byID = map[string]*job{}
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.FileServerFS(files))
	mux.HandleFunc("GET /login", u.loginForm)
	mux.HandleFunc("POST /login", u.login)
	mux.Handle("POST /logout", u.authed(u.logout))
	mux.Handle("GET /{$}", u.authed(u.mastersPage))
	mux.Handle("GET /masters", u.authed(u.mastersPage))
	mux.Handle("GET /cluster", u.authed(u.mastersPage))
	mux.Handle("GET /topology", u.authed(u.topologyPage))
	mux.Handle("GET /topology.svg", u.authed(u.topologySVG))
	mux.Handle("GET /volumes", u.authed(u.volumesPage))
	mux.Handle("GET /maintenance", u.authed(u.maintenancePage))
	mux.Handle("POST /maintenance", u.authed(u.startJob))
	mux.Handle("GET /collections", u.authed(u.collectionsPage))
	mux.Handle("POST /collections/create", u.authed(u.createCollection))
	mux.Handle("GET /maintenance/jobs/{id}", u.authed(u.jobPage))
	mux.Handle("GET /files", u.authed(u.filesPage))
	mux.Handle("GET /files/download", u.authed(u.download))
	mux.Handle("POST /files/upload", u.authed(u.upload))
	mux.Handle("POST /files/mkdir", u.authed(u.mkdir))
	mux.Handle("POST /files/rename", u.authed(u.rename))
	mux.Handle("POST /files/delete", u.authed(u.remove))
	mux.Handle("GET /buckets", u.authed(u.bucketsPage))
	mux.Handle("POST /buckets/create", u.authed(u.createBucket))
	mux.Handle("POST /buckets/delete", u.authed(u.deleteBucket))
	mux.Handle("POST /buckets/versioning", u.authed(u.setVersioning))
	mux.Handle("POST /buckets/quota", u.authed(u.setQuota))
	mux.Handle("GET /s3keys", u.authed(u.keysPage))
	mux.Handle("POST /s3keys/create", u.authed(u.createKey))
	mux.Handle("POST /s3keys/revoke", u.authed(u.revokeKey))
	mux.Handle("/", u.authed(func(w http.ResponseWriter, r *http.Request, id identity) {
		u.render(w, r, http.StatusNotFound, "error", id, "Not found", map[string]any{"Message": "No page at " + r.URL.Path})
	}))
	u.mux = mux
	return u, nil
}

func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'")
	h.Set("Cache-Control", "no-store")
	u.mux.ServeHTTP(w, r)
}

type authedHandler func(w http.ResponseWriter, r *http.Request, id identity)

// authed refuses requests without valid credentials (401, or a redirect
// to the login form for a browser with none) and POSTs without the CSRF
// token (403), before h sees them.
func (u *UI) authed(h authedHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, st := u.auth.authenticate(r)
		switch st {
		case authBad:
			w.Header().Set("WWW-Authenticate", `Basic realm="kelp admin", charset="UTF-8"`)
			http.Error(w, "wrong user or password", http.StatusUnauthorized)
			return
		case authNone:
			if wantsHTML(r) {
				if _, err := r.Cookie(formSeenCookie); err == nil {
					http.Redirect(w, r, "/login?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
					return
				}
				// A browser that has not seen the login form yet: a
				// basic-auth challenge whose page is the form. A browser
				// given http://user:password@host/ answers it with those
				// (they are sent only after a challenge; a redirect to
				// the form would never use them); any other shows the
				// form, or first its own dialog (cancel: the form).
				w.Header().Set("WWW-Authenticate", `Basic realm="kelp admin", charset="UTF-8"`)
				u.showLogin(w, r, http.StatusUnauthorized, "", r.URL.RequestURI())
				return
			}
			w.Header().Set("WWW-Authenticate", `Basic realm="kelp admin", charset="UTF-8"`)
			http.Error(w, "log in first (or use HTTP basic auth)", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if err := parseForm(r); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if !csrfOK(r, id) {
				http.Error(w, "missing or wrong CSRF token", http.StatusForbidden)
				return
			}
		}
		h(w, r, id)
	})
}

// maxForm bounds a form body (uploads stream through multipart parsing).
const maxForm = 64 << 20

func parseForm(r *http.Request) error {
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		r.Body = http.MaxBytesReader(nil, r.Body, maxForm)
		if err := r.ParseMultipartForm(8 << 20); err != nil {
			return errors.New("bad form: " + err.Error())
		}
		return nil
	}
	r.Body = http.MaxBytesReader(nil, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		return errors.New("bad form: " + err.Error())
	}
	return nil
}

// view is what every page template gets.
type view struct {
	Title string
	Path  string
	User  string
	CSRF  string
	Self  string
	Now   time.Time
	Data  any
	// Refresh, when not 0, reloads the page after that many seconds (a
	// running job's progress without JavaScript).
	Refresh int
}

func (u *UI) render(w http.ResponseWriter, r *http.Request, status int, name string, id identity, title string, data any) {
	var b strings.Builder
	v := view{Title: title, Path: r.URL.Path, User: id.user, CSRF: id.csrf, Self: u.cfg.Source.HTTPAddr(), Now: u.cfg.Now(), Data: data}
	if rf, ok := data.(interface{ refresh() int }); ok {
		v.Refresh = rf.refresh()
	}
	if err := pages.ExecuteTemplate(&b, name, v); err != nil {
		u.log.Error("render", "page", name, "err", err)
		http.Error(w, "adminui: render "+name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, b.String())
}

func (u *UI) loginForm(w http.ResponseWriter, r *http.Request) {
	u.showLogin(w, r, http.StatusOK, "", r.FormValue("next"))
}

// formSeenCookie marks a browser that was shown the login form: later
// visits without a session go to the form straight away, without the
// basic-auth challenge of the first one (authed).
const formSeenCookie = "kelp_admin_form"

func (u *UI) showLogin(w http.ResponseWriter, r *http.Request, status int, msg, next string) {
	tok := randomToken()
	http.SetCookie(w, &http.Cookie{Name: loginCSRFName, Value: tok, Path: "/login", HttpOnly: true, Secure: isTLS(r),
		SameSite: http.SameSiteStrictMode})
	http.SetCookie(w, &http.Cookie{Name: formSeenCookie, Value: "1", Path: "/", HttpOnly: true, Secure: isTLS(r),
		SameSite: http.SameSiteStrictMode, MaxAge: 365 * 24 * 3600})
	u.render(w, r, status, "login", identity{csrf: tok}, "Log in",
		map[string]any{"Next": safeNext(next), "Error": msg})
}

func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	if err := parseForm(r); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c, err := r.Cookie(loginCSRFName)
	if err != nil || c.Value == "" || !csrfOK(r, identity{csrf: c.Value}) {
		http.Error(w, "missing or wrong CSRF token: reload the login page", http.StatusForbidden)
		return
	}
	user := r.PostFormValue("user")
	if !u.auth.check(user, r.PostFormValue("password")) {
		u.log.Warn("admin login failed", "user", user, "remote", r.RemoteAddr)
		u.showLogin(w, r, http.StatusUnauthorized, "Wrong user or password.", r.PostFormValue("next"))
		return
	}
	u.auth.newSession(w, r, user)
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

func (u *UI) logout(w http.ResponseWriter, r *http.Request, id identity) {
	u.auth.endSession(w, r, id)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

package adminui

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Authentication: a login form opens a session kept in this process's
// memory (a random token in an HttpOnly, SameSite=Strict cookie, Secure
// when the request came over TLS); HTTP basic auth with the same
// credentials works without a session, for scripts.
//
// CSRF: every state-changing request (POST) carries a token, as the form
// field "csrf" or the header X-CSRF-Token. A session's token is random and
// kept with the session; a basic-auth client's token is derived from the
// process key and the user, and shown in every page's forms, so a script
// reads it from any page. The login form uses a double-submit cookie.

const (
	sessionTTL    = 12 * time.Hour
	csrfField     = "csrf"
	csrfHeader    = "X-CSRF-Token"
	loginCSRFName = "kelp_admin_login"
)

type session struct {
	user    string
	csrf    string
	expires time.Time
}

type auth struct {
	user, password string
	// credential, when set, replaces user and password: a user and a
	// bcrypt hash the cluster agreed on (Config.Credential).
	credential func() (user, hash string)
	cookie     string // cookie name, per master (cookies ignore the port)
	key        []byte // random per process: HMAC key of derived tokens

	mu       sync.Mutex
	sessions map[string]*session
	// verified remembers credentials that matched a bcrypt hash (as HMACs
	// under key), so that a script's basic auth pays bcrypt's ~50 ms once,
	// not on every request; wrong passwords are never remembered.
	verified map[string]bool
}

func newAuth(user, password string, credential func() (string, string), cookie string) *auth {
	key := make([]byte, 32)
	rand.Read(key)
	return &auth{user: user, password: password, credential: credential, cookie: cookie, key: key,
		sessions: map[string]*session{}, verified: map[string]bool{}}
}

func randomToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// maxVerified bounds the cache of verified credentials.
const maxVerified = 64

// check compares credentials in constant time (or with bcrypt).
func (a *auth) check(user, password string) bool {
	if a.credential != nil {
		return a.checkHash(user, password)
	}
	u := subtle.ConstantTimeCompare([]byte(user), []byte(a.user))
	p := subtle.ConstantTimeCompare([]byte(password), []byte(a.password))
	return u&p == 1
}

func (a *auth) checkHash(user, password string) bool {
	wantUser, hash := a.credential()
	if hash == "" || subtle.ConstantTimeCompare([]byte(user), []byte(wantUser)) != 1 {
		return false // no credential yet: nobody gets in
	}
	memo := a.derived("verified\x00" + user + "\x00" + hash + "\x00" + password)
	a.mu.Lock()
	ok := a.verified[memo]
	a.mu.Unlock()
	if ok {
		return true
	}
	if bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) != nil {
		return false
	}
	a.mu.Lock()
	if len(a.verified) >= maxVerified {
		clear(a.verified)
	}
	a.verified[memo] = true
	a.mu.Unlock()
	return true
}

func (a *auth) derived(purpose string) string {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte(purpose))
	return hex.EncodeToString(m.Sum(nil))
}

// identity is who a request is: its user and the CSRF token its forms must
// carry.
type identity struct {
	user    string
	csrf    string
	session string // "" for basic auth
}

// authStatus is the outcome of authenticate.
type authStatus int

const (
	authNone authStatus = iota // no credentials
	authBad                    // wrong credentials
	authOK
)

func (a *auth) authenticate(r *http.Request) (identity, authStatus) {
	if u, p, ok := r.BasicAuth(); ok {
		if !a.check(u, p) {
			return identity{}, authBad
		}
		return identity{user: u, csrf: a.derived("basic:" + u)}, authOK
	}
	c, err := r.Cookie(a.cookie)
	if err != nil || c.Value == "" {
		return identity{}, authNone
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[c.Value]
	if !ok || time.Now().After(s.expires) {
		delete(a.sessions, c.Value)
		return identity{}, authNone
	}
	return identity{user: s.user, csrf: s.csrf, session: c.Value}, authOK
}

func (a *auth) newSession(w http.ResponseWriter, r *http.Request, user string) {
	tok := randomToken()
	now := time.Now()
	a.mu.Lock()
	for k, s := range a.sessions {
		if now.After(s.expires) {
			delete(a.sessions, k)
		}
	}
	a.sessions[tok] = &session{user: user, csrf: randomToken(), expires: now.Add(sessionTTL)}
	a.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: a.cookie, Value: tok, Path: "/", HttpOnly: true, Secure: isTLS(r),
		SameSite: http.SameSiteStrictMode, Expires: now.Add(sessionTTL)})
}

func (a *auth) endSession(w http.ResponseWriter, r *http.Request, id identity) {
	if id.session != "" {
		a.mu.Lock()
		delete(a.sessions, id.session)
		a.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: a.cookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: isTLS(r),
		SameSite: http.SameSiteStrictMode})
}

func isTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// csrfOK says whether a state-changing request carries id's token. The
// form is parsed already (multipart forms included).
func csrfOK(r *http.Request, id identity) bool {
	got := r.Header.Get(csrfHeader)
	if got == "" {
		got = r.FormValue(csrfField)
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(id.csrf)) == 1
}

// wantsHTML says whether a request without credentials comes from a
// browser (sent to the login form) rather than a script (answered 401).
func wantsHTML(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.Contains(r.Header.Get("Accept"), "text/html")
}

// safeNext keeps a post-login redirect on this site.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if next == "" || err != nil || u.IsAbs() || u.Host != "" || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(next, "//") ||
		strings.HasPrefix(u.Path, "/login") {
		return "/"
	}
	return next
}

package webdav

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// Users is the optional basic-auth user list of `kelp webdav --users=FILE`:
// one "name:bcrypt-hash" line per user, as `htpasswd -nbB name password`
// prints them; blank lines and lines starting with # are skipped. Plain
// passwords are not accepted: a stolen file must not give the passwords.
type Users struct {
	hashes map[string][]byte
	mu     sync.Mutex
	ok     map[[32]byte]bool // sha256(name, password) of credentials that passed bcrypt
}

// LoadUsers reads a users file; a malformed line is an error naming it.
func LoadUsers(file string) (*Users, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("webdav users: %w", err)
	}
	defer f.Close()
	u := &Users{hashes: map[string][]byte{}, ok: map[[32]byte]bool{}}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, hash, ok := strings.Cut(line, ":")
		if !ok || name == "" {
			return nil, fmt.Errorf("webdav users: %s:%d: want name:bcrypt-hash", file, n)
		}
		if _, err := bcrypt.Cost([]byte(hash)); err != nil {
			return nil, fmt.Errorf("webdav users: %s:%d: user %s: not a bcrypt hash (make one with htpasswd -nbB): %v", file, n, name, err)
		}
		u.hashes[name] = []byte(hash)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("webdav users: %s: %w", file, err)
	}
	if len(u.hashes) == 0 {
		return nil, fmt.Errorf("webdav users: %s has no user", file)
	}
	return u, nil
}

// check verifies credentials; a pair that passed once is remembered (as a
// hash), so that a client sending thousands of requests pays bcrypt once.
func (u *Users) check(name, password string) bool {
	hash, ok := u.hashes[name]
	if !ok {
		return false
	}
	key := sha256.Sum256([]byte(name + "\x00" + password))
	u.mu.Lock()
	known := u.ok[key]
	u.mu.Unlock()
	if known {
		return true
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil {
		return false
	}
	u.mu.Lock()
	if len(u.ok) < 10000 {
		u.ok[key] = true
	}
	u.mu.Unlock()
	return true
}

// requireAuth answers 401 with a Basic challenge to a request without
// valid credentials.
func requireAuth(u *Users, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, password, ok := r.BasicAuth()
		if !ok || !u.check(name, password) {
			w.Header().Set("WWW-Authenticate", `Basic realm="kelp", charset="UTF-8"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

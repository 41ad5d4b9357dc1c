// Package auth is Kelp's authentication: signed file ids (short-lived JWTs
// a volume server checks before a write, a delete or, with a read key, a
// read), access tokens with roles for the filer's and the master's APIs,
// verified mTLS client certificates counted as servers, and the audit log.
// See docs/security.md.
package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kelpfs/kelp/internal/fid"
)

// ErrUnauthorized is the error of a missing, expired, forged or misbound
// token. Its messages never carry the token.
var ErrUnauthorized = errors.New("unauthorized")

// Signer signs and checks file-id tokens with HMAC keys. The first key
// signs; every key verifies: a second key is the rotation window (a new key
// accepted everywhere before it signs, or the previous one still accepted
// after). A Signer made from a key file re-reads it when it changes (see
// ReloadInterval). A nil *Signer signs nothing ("") and accepts everything:
// security is off.
type Signer struct {
	expires time.Duration
	file    *watched // nil: fixed keys

	mu       sync.RWMutex
	keys     []signKey // keys[0] signs
	srvTok   string
	srvUntil time.Time
}

// signKey is one signing key and the key of its server tokens.
type signKey struct {
	key    *macKey
	srvKey *macKey // derived: tokens servers show each other (internal endpoints)
}

func newSignKey(key string) signKey {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte("kelp server token"))
	return signKey{key: newMACKey([]byte(key)), srvKey: newMACKey(m.Sum(nil))}
}

// DefaultExpiry is a file token's lifetime when none is configured.
const DefaultExpiry = 10 * time.Second

// NewSigner returns a Signer for key, or nil when key is empty.
func NewSigner(key string, expires time.Duration) *Signer {
	if key == "" {
		return nil
	}
	return newSigner([]signKey{newSignKey(key)}, expires)
}

func newSigner(keys []signKey, expires time.Duration) *Signer {
	if expires <= 0 {
		expires = DefaultExpiry
	}
	return &Signer{keys: keys, expires: expires}
}

// MaxKeys is how many keys a key file may hold: the signing key and the
// one being rotated in or out.
const MaxKeys = 2

// ParseKeys reads a key file: one key a line, the first signs, the other
// (at most MaxKeys in all) is accepted for verification too; blank lines
// and # comments are skipped. Errors never carry a key.
func ParseKeys(body []byte) ([]string, error) {
	var keys []string
	for _, line := range strings.Split(string(body), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		keys = append(keys, line)
	}
	if len(keys) == 0 {
		return nil, errors.New("no key")
	}
	if len(keys) > MaxKeys {
		return nil, fmt.Errorf("%d keys, at most %d (the signing key and the previous or next one)", len(keys), MaxKeys)
	}
	return keys, nil
}

// NewSignerFile returns a Signer with the keys of file (see ParseKeys),
// re-read when the file changes: a rotation needs no restart.
func NewSignerFile(file string, expires time.Duration) (*Signer, error) {
	s := newSigner(nil, expires)
	s.file = &watched{path: file, load: func(body []byte) error {
		ks, err := ParseKeys(body)
		if err != nil {
			return err
		}
		keys := make([]signKey, len(ks))
		for i, k := range ks {
			keys[i] = newSignKey(k)
		}
		s.mu.Lock()
		if len(s.keys) == 0 || !hmac.Equal(s.keys[0].key.key, keys[0].key.key) {
			s.srvTok = "" // the signing key changed: a new server token
		}
		s.keys = keys
		s.mu.Unlock()
		return nil
	}}
	if err := s.file.init(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return s, nil
}

// current is the keys in use, after a check for a new key file.
func (s *Signer) current() []signKey {
	s.file.refresh()
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.keys
}

// verifyKeys is the keys tokens are checked with: the signing keys, or
// for server tokens the keys derived from them.
func verifyKeys(keys []signKey, server bool) []*macKey {
	set := make([]*macKey, len(keys))
	for i, k := range keys {
		if server {
			set[i] = k.srvKey
		} else {
			set[i] = k.key
		}
	}
	return set
}

// Enabled reports whether s checks tokens.
func (s *Signer) Enabled() bool { return s != nil }

// fileClaims bind a token to a volume and a range of keys [Key, Key+N):
// an assign with count=N reserves that many keys (clients pick a fresh
// cookie for each, see internal/client/keyblock.go). With N == 1 the
// cookie is bound too.
type fileClaims struct {
	FID string `json:"fid"`
	N   uint64 `json:"n,omitempty"`
	registered
}

func (c *fileClaims) decodeFast(p []byte) bool {
	var d fileClaims
	if !scanFlat(p, func(key string, val []byte, str bool) bool {
		switch key {
		case "fid":
			d.FID = string(val)
			return str
		case "n":
			n, err := strconv.ParseUint(string(val), 10, 64)
			d.N = n
			return !str && err == nil
		}
		return d.decodeTime(key, val, str)
	}) {
		return false
	}
	*c = d
	return true
}

// Sign returns a token for file id and the count-1 keys after it.
func (s *Signer) Sign(id fid.FileID, count uint64) string {
	if s == nil {
		return ""
	}
	if count <= 1 {
		count = 0
	}
	c := fileClaims{FID: id.String(), N: count, registered: expiresAt(time.Now().Add(s.expires))}
	t, err := signHS256(s.current()[0].key, &c)
	if err != nil {
		return "" // HMAC signing does not fail
	}
	return t
}

// Verify checks that token is a valid, unexpired token of s for id.
func (s *Signer) Verify(token string, id fid.FileID) error {
	if s == nil {
		return nil
	}
	if token == "" {
		return fmt.Errorf("%w: no token for %s", ErrUnauthorized, id)
	}
	var c fileClaims
	if err := verifyHS256(token, verifyKeys(s.current(), false), &c, time.Now()); err != nil {
		return fmt.Errorf("%w: bad token for %s: %s", ErrUnauthorized, id, err)
	}
	bound, err := fid.Parse(c.FID)
	if err != nil {
		return fmt.Errorf("%w: token names no file id", ErrUnauthorized)
	}
	ok := bound.Volume == id.Volume
	if c.N <= 1 {
		ok = ok && bound.Key == id.Key && bound.Cookie == id.Cookie
	} else {
		ok = ok && id.Key >= bound.Key && id.Key-bound.Key < c.N
	}
	if !ok {
		return fmt.Errorf("%w: token is for %s, not %s", ErrUnauthorized, c.FID, id)
	}
	return nil
}

type serverClaims struct {
	Srv bool `json:"srv"`
	registered
}

func (c *serverClaims) decodeFast(p []byte) bool {
	var d serverClaims
	if !scanFlat(p, func(key string, val []byte, str bool) bool {
		if key == "srv" {
			d.Srv = string(val) == "true"
			return !str && (d.Srv || string(val) == "false")
		}
		return d.decodeTime(key, val, str)
	}) {
		return false
	}
	*c = d
	return true
}

// ServerToken is the token servers holding the key show each other on
// internal endpoints (volume /sync/*, /ec/*, replica writes) and on the
// filer's and the master's APIs; it is signed with a key derived from the
// signing key, so it is never a file token. It is cached for half its life.
func (s *Signer) ServerToken() string {
	if s == nil {
		return ""
	}
	s.file.refresh()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.srvTok != "" && now.Before(s.srvUntil) {
		return s.srvTok
	}
	life := max(s.expires, time.Minute)
	c := serverClaims{Srv: true, registered: expiresAt(now.Add(life))}
	t, err := signHS256(s.keys[0].srvKey, &c)
	if err != nil {
		return ""
	}
	s.srvTok, s.srvUntil = t, now.Add(life/2)
	return t
}

// The errors of VerifyServer, made once: a volume server tries every
// token of a write as a server token first, and formatting the refusal of
// a file token cost more than checking it.
var badServerTokens = func() map[error]error {
	m := map[error]error{}
	for _, e := range []error{errMalformed, errSignature, errExpired, errNotValidYet, errNoExpiration} {
		m[e] = fmt.Errorf("%w: bad server token: %s", ErrUnauthorized, e)
	}
	return m
}()

func badServerToken(err error) error {
	if e, ok := badServerTokens[err]; ok {
		return e
	}
	return fmt.Errorf("%w: bad server token: %s", ErrUnauthorized, err)
}

// VerifyServer checks a ServerToken.
func (s *Signer) VerifyServer(token string) error {
	if s == nil {
		return nil
	}
	if token == "" {
		return fmt.Errorf("%w: no server token", ErrUnauthorized)
	}
	var c serverClaims
	if err := verifyHS256(token, verifyKeys(s.current(), true), &c, time.Now()); err != nil {
		return badServerToken(err)
	}
	if !c.Srv {
		return fmt.Errorf("%w: not a server token", ErrUnauthorized)
	}
	return nil
}

// IsJWT reports whether tok looks like a JWT (three dot-separated parts).
func IsJWT(tok string) bool { return strings.Count(tok, ".") == 2 }

// Bearer returns the token of an "Authorization: Bearer TOKEN" value.
func Bearer(h string) string {
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// AdminTokenLife is how long a vouched admin token is valid.
const AdminTokenLife = 2 * time.Minute

type adminClaims struct {
	Name string `json:"adm"`
	Role string `json:"role"`
	registered
}

func adminKey(k signKey) []byte {
	m := hmac.New(sha256.New, k.key.key)
	m.Write([]byte("kelp admin token"))
	return m.Sum(nil)
}

// AdminToken is a token by which a master vouches for a client it has
// authenticated (name, role): volume servers holding the signing key take
// it on their admin API, so they need no copy of the masters' access
// tokens. It is signed with a key derived from the signing key, so it is
// neither a file token nor a server token, and lives AdminTokenLife.
func (s *Signer) AdminToken(id Identity) string {
	if s == nil || id.Role == RoleNone {
		return ""
	}
	k := s.current()[0]
	c := adminClaims{Name: id.Name, Role: id.Role.String(), registered: expiresAt(time.Now().Add(AdminTokenLife))}
	t, err := signHS256(newMACKey(adminKey(k)), &c)
	if err != nil {
		return ""
	}
	return t
}

// VerifyAdmin checks an AdminToken and returns the identity it vouches for.
func (s *Signer) VerifyAdmin(token string) (Identity, error) {
	if s == nil {
		return Identity{}, fmt.Errorf("%w: no signing key", ErrUnauthorized)
	}
	var c adminClaims
	keys := s.current()
	set := make([]*macKey, len(keys))
	for i, k := range keys {
		set[i] = newMACKey(adminKey(k))
	}
	if err := verifyHS256(token, set, &c, time.Now()); err != nil {
		return Identity{}, fmt.Errorf("%w: bad admin token: %s", ErrUnauthorized, err)
	}
	role, err := ParseRole(c.Role)
	if err != nil || c.Name == "" {
		return Identity{}, fmt.Errorf("%w: admin token names no identity", ErrUnauthorized)
	}
	return Identity{Name: "vouched:" + c.Name, Role: role}, nil
}

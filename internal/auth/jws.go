package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"hash"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Kelp's tokens are JWTs signed with HMAC-SHA256 (RFC 7519, "HS256"), in
// the form every JWT library reads and writes. They are signed and checked
// here rather than through a general JWT library: a volume server checks
// one per write (and tries it as a server token first), a master signs one
// per assign, and the general path (decoding the header and the claims
// through maps and reflection before the signature is looked at) cost 10 µs
// and 78 allocations per sign+verify, a fifth of the server's CPU per 1 KiB
// write. Here the signature is checked first, in constant time, and only a
// token that carries a valid one has its claims decoded.
//
// What is accepted is what the previous implementation (golang-jwt/v5 with
// HS256 the only method, expiry required, a second of leeway) accepted:
// three base64url segments without padding; a header naming alg HS256; a
// signature by one of the keys; an "exp" claim (a JSON number of seconds)
// not more than leeway in the past; an "nbf" claim, if any, not more than
// leeway in the future.

// hs256Header is the base64url encoding of {"alg":"HS256","typ":"JWT"}, the
// header of the tokens Kelp signs (and of golang-jwt's).
const hs256Header = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"

// leeway is the clock skew allowed between the signing and the checking
// server.
const leeway = time.Second

var b64 = base64.RawURLEncoding

// Why a token is refused; never carrying the token.
var (
	errMalformed    = errors.New("malformed")
	errSignature    = errors.New("signature invalid")
	errExpired      = errors.New("expired")
	errNotValidYet  = errors.New("not valid yet")
	errNoExpiration = errors.New("no expiry")
)

// macKey is an HMAC-SHA256 key with keyed hashes to reuse: keying one
// (two SHA-256 states) cost more than the MAC of a token.
type macKey struct {
	key  []byte
	pool sync.Pool
}

func newMACKey(key []byte) *macKey {
	k := &macKey{key: key}
	k.pool.New = func() any { return hmac.New(sha256.New, k.key) }
	return k
}

// sum appends the MAC of msg to dst.
func (k *macKey) sum(dst, msg []byte) []byte {
	m := k.pool.Get().(hash.Hash)
	m.Reset()
	m.Write(msg)
	dst = m.Sum(dst)
	k.pool.Put(m)
	return dst
}

// signHS256 returns the token of claims (marshalled to JSON) signed with key.
func signHS256(key *macKey, claims any) (string, error) {
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	b := make([]byte, 0, len(hs256Header)+1+b64.EncodedLen(len(payload))+1+b64.EncodedLen(sha256.Size))
	b = append(b, hs256Header...)
	b = append(b, '.')
	b = b64.AppendEncode(b, payload)
	var sum [sha256.Size]byte
	mac := key.sum(sum[:0], b)
	b = append(b, '.')
	b = b64.AppendEncode(b, mac)
	return string(b), nil
}

// registered are the claims of a validity period, embedded in every
// token's claims.
type registered struct {
	Exp *json.Number `json:"exp,omitempty"`
	Nbf *json.Number `json:"nbf,omitempty"`
}

func (r *registered) period() *registered { return r }

// expiresAt is the registered claims of a token valid until t.
func expiresAt(t time.Time) registered {
	n := json.Number(strconv.FormatInt(t.Unix(), 10))
	return registered{Exp: &n}
}

// verifyHS256 checks token's form, header and signature (by any of keys),
// then decodes its claims into claims and checks their validity period at
// now. The claims are not looked at unless the signature is valid.
func verifyHS256(token string, keys []*macKey, claims interface{ period() *registered }, now time.Time) error {
	i := strings.IndexByte(token, '.')
	j := strings.LastIndexByte(token, '.')
	if i <= 0 || j == i || strings.IndexByte(token[i+1:j], '.') >= 0 {
		return errMalformed
	}
	if token[:i] != hs256Header {
		h, err := b64.DecodeString(token[:i])
		if err != nil {
			return errMalformed
		}
		var hdr struct {
			Alg string `json:"alg"`
		}
		if json.Unmarshal(h, &hdr) != nil {
			return errMalformed
		}
		if hdr.Alg != "HS256" {
			return errSignature // golang-jwt's answer to a method not allowed
		}
	}
	var sig [sha256.Size]byte
	if b64.DecodedLen(len(token)-j-1) != len(sig) {
		return errSignature
	}
	if n, err := b64.Decode(sig[:], []byte(token[j+1:])); err != nil || n != len(sig) {
		return errMalformed
	}
	ok := false
	var sum [sha256.Size]byte
	signed := []byte(token[:j])
	for _, k := range keys {
		if hmac.Equal(k.sum(sum[:0], signed), sig[:]) {
			ok = true
			break
		}
	}
	if !ok {
		return errSignature
	}
	payload, err := b64.DecodeString(token[i+1 : j])
	if err != nil {
		return errMalformed
	}
	if fc, ok := claims.(fastClaims); !ok || !fc.decodeFast(payload) {
		if json.Unmarshal(payload, claims) != nil {
			return errMalformed
		}
	}
	times := claims.period()
	if times.Exp == nil {
		return errNoExpiration
	}
	exp, err := numericDate(*times.Exp)
	if err != nil {
		return errMalformed
	}
	if !now.Add(-leeway).Before(exp) {
		return errExpired
	}
	if times.Nbf != nil {
		nbf, err := numericDate(*times.Nbf)
		if err != nil {
			return errMalformed
		}
		if now.Add(leeway).Before(nbf) {
			return errNotValidYet
		}
	}
	return nil
}

// numericDate reads a JWT NumericDate: seconds since the epoch, an integer
// or a fraction (cut to the second, as golang-jwt did).
func numericDate(n json.Number) (time.Time, error) {
	if s, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return time.Unix(s, 0), nil
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return time.Time{}, errMalformed
	}
	if f < math.MinInt64 || f > math.MaxInt64 {
		return time.Time{}, errMalformed
	}
	return time.Unix(int64(math.Trunc(f)), 0), nil
}

// fastClaims are claims that can read the payloads Kelp signs without
// reflection: decodeFast returns false for anything it does not take
// exactly as encoding/json would, and the caller then uses encoding/json.
type fastClaims interface {
	decodeFast(payload []byte) bool
}

// scanFlat calls f for each member of payload, a JSON object whose keys
// are plain (no escapes) and whose values are plain strings (given without
// their quotes), integers, true or false. It returns false, possibly after
// some calls, for anything else (nested values, escapes, fractions,
// exponents, null, a key seen twice) or when f does.
func scanFlat(p []byte, f func(key string, val []byte, str bool) bool) bool {
	i := 0
	ws := func() {
		for i < len(p) && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r') {
			i++
		}
	}
	plainString := func() ([]byte, bool) {
		if i >= len(p) || p[i] != '"' {
			return nil, false
		}
		i++
		start := i
		for i < len(p) && p[i] != '"' {
			if c := p[i]; c == '\\' || c < 0x20 || c >= 0x80 {
				return nil, false
			}
			i++
		}
		if i >= len(p) {
			return nil, false
		}
		i++
		return p[start : i-1], true
	}
	var seen [8]string
	n := 0
	ws()
	if i >= len(p) || p[i] != '{' {
		return false
	}
	i++
	ws()
	if i < len(p) && p[i] == '}' {
		i++
		ws()
		return i == len(p)
	}
	for {
		ws()
		k, ok := plainString()
		if !ok || n == len(seen) {
			return false
		}
		key := string(k)
		for _, s := range seen[:n] {
			if s == key {
				return false
			}
		}
		seen[n] = key
		n++
		ws()
		if i >= len(p) || p[i] != ':' {
			return false
		}
		i++
		ws()
		if i >= len(p) {
			return false
		}
		var val []byte
		str := false
		switch c := p[i]; {
		case c == '"':
			if val, ok = plainString(); !ok {
				return false
			}
			str = true
		case c == '-' || c >= '0' && c <= '9':
			start := i
			if c == '-' {
				i++
			}
			d := i
			for i < len(p) && p[i] >= '0' && p[i] <= '9' {
				i++
			}
			if i == d || p[d] == '0' && i-d > 1 {
				return false // no digits, or a leading zero
			}
			val = p[start:i]
		case bytes.HasPrefix(p[i:], []byte("true")):
			val, i = p[i:i+4], i+4
		case bytes.HasPrefix(p[i:], []byte("false")):
			val, i = p[i:i+5], i+5
		default:
			return false
		}
		if !f(key, val, str) {
			return false
		}
		ws()
		if i >= len(p) {
			return false
		}
		if p[i] == '}' {
			i++
			ws()
			return i == len(p)
		}
		if p[i] != ',' {
			return false
		}
		i++
	}
}

// decodeTime takes the "exp" and "nbf" members for decodeFast.
func (r *registered) decodeTime(key string, val []byte, str bool) bool {
	if str {
		return false
	}
	n := json.Number(val)
	switch key {
	case "exp":
		r.Exp = &n
	case "nbf":
		r.Nbf = &n
	default:
		return false
	}
	return true
}

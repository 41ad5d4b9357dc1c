package sigv4

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

const (
	algorithm   = "AWS4-HMAC-SHA256"
	timeFormat  = "20060102T150405Z"
	dateFormat  = "20060102"
	terminator  = "aws4_request"
	serviceS3   = "s3"
	emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	upperhex    = "0123456789ABCDEF"
)

// uriEncode applies the SigV4 URI encoding: every byte except the
// unreserved characters A-Z a-z 0-9 - _ . ~ becomes %XX (upper-case hex);
// '/' is kept when keepSlash is set (object key paths), encoded otherwise
// (query names and values). Space is %20, never '+'.
func uriEncode(s string, keepSlash bool) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !unreserved(s[i]) && !(keepSlash && s[i] == '/') {
			n++
		}
	}
	if n == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if unreserved(c) || (keepSlash && c == '/') {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(upperhex[c>>4])
		b.WriteByte(upperhex[c&15])
	}
	return b.String()
}

func unreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == '~'
}

// canonicalURIs returns the canonical URI forms worth trying, most likely
// first. S3 neither normalises the path (no "." / ".." removal, no slash
// merging) nor encodes it twice. The first form re-encodes the decoded path
// the way every SDK does, so it does not matter how the client escaped the
// wire path; the second is the path exactly as sent, for clients that sign
// the wire form they chose (for example a literal '+' or '!').
func canonicalURIs(r *http.Request) []string {
	p := r.URL.Path
	if p == "" {
		p = "/"
	}
	first := uriEncode(p, true)
	raw := r.URL.EscapedPath()
	if raw == "" {
		raw = "/"
	}
	if raw == first {
		return []string{first}
	}
	return []string{first, raw}
}

type queryPair struct{ k, v string }

// canonicalQueries returns the canonical query strings worth trying, most
// likely first: names and values decoded and re-encoded with uriEncode
// (a literal '+' is a plus sign, as S3 treats it), then the pairs as sent.
// Both are sorted by name, then value; a name without '=' gets an empty
// value. skip names a parameter left out (X-Amz-Signature when presigned).
func canonicalQueries(rawQuery, skip string) []string {
	if rawQuery == "" {
		return []string{""}
	}
	var norm, raw []queryPair
	for _, part := range strings.Split(rawQuery, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		dk, errK := url.PathUnescape(k)
		dv, errV := url.PathUnescape(v)
		if errK != nil {
			dk = k
		}
		if errV != nil {
			dv = v
		}
		if skip != "" && (dk == skip || k == skip) {
			continue
		}
		norm = append(norm, queryPair{uriEncode(dk, false), uriEncode(dv, false)})
		raw = append(raw, queryPair{k, v})
	}
	a, b := joinQuery(norm), joinQuery(raw)
	if a == b {
		return []string{a}
	}
	return []string{a, b}
}

func joinQuery(pairs []queryPair) string {
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].k != pairs[j].k {
			return pairs[i].k < pairs[j].k
		}
		return pairs[i].v < pairs[j].v
	})
	var b strings.Builder
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.k)
		b.WriteByte('=')
		b.WriteString(p.v)
	}
	return b.String()
}

// headerValue returns the canonical value of the signed header name
// (lower-case): every value trimmed, runs of white space collapsed to one
// space, repeated headers joined with ','. net/http moves Host,
// Content-Length and Transfer-Encoding out of r.Header; they are read from
// where it puts them.
func headerValue(r *http.Request, name string) string {
	vals := r.Header.Values(name)
	if len(vals) == 0 {
		switch name {
		case "host":
			return r.Host
		case "content-length":
			if r.ContentLength > 0 {
				return strconv.FormatInt(r.ContentLength, 10)
			}
		case "transfer-encoding":
			return strings.Join(r.TransferEncoding, ",")
		}
		return ""
	}
	if len(vals) == 1 {
		return collapseSpaces(vals[0])
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = collapseSpaces(v)
	}
	return strings.Join(out, ",")
}

func collapseSpaces(v string) string {
	return strings.Join(strings.Fields(v), " ")
}

// canonicalHeaderBlocks returns the canonical header blocks worth trying:
// the headers as received, then, when the Host carries the scheme's
// default port, with that port removed (SDKs drop it before signing while
// some HTTP stacks still send it).
func canonicalHeaderBlocks(r *http.Request, signed []string) []string {
	build := func(host string) string {
		var b strings.Builder
		for _, name := range signed {
			b.WriteString(name)
			b.WriteByte(':')
			if name == "host" {
				b.WriteString(host)
			} else {
				b.WriteString(headerValue(r, name))
			}
			b.WriteByte('\n')
		}
		return b.String()
	}
	first := build(r.Host)
	if h, port, err := net.SplitHostPort(r.Host); err == nil && (port == "80" || port == "443") {
		if strings.Contains(h, ":") {
			h = "[" + h + "]"
		}
		return []string{first, build(h)}
	}
	return []string{first}
}

// canonicalRequests returns every canonical request candidate for r,
// most likely first. There is usually exactly one.
func canonicalRequests(r *http.Request, signed []string, payloadHash, skipQuery string) []string {
	uris := canonicalURIs(r)
	queries := canonicalQueries(r.URL.RawQuery, skipQuery)
	headers := canonicalHeaderBlocks(r, signed)
	signedList := strings.Join(signed, ";")
	out := make([]string, 0, len(uris)*len(queries)*len(headers))
	for _, h := range headers {
		for _, u := range uris {
			for _, q := range queries {
				out = append(out, r.Method+"\n"+u+"\n"+q+"\n"+h+"\n"+signedList+"\n"+payloadHash)
			}
		}
	}
	return out
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// signingKey derives the SigV4 signing key for one day, region and service.
func signingKey(secret, date, region, service string) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), date)
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, service)
	return hmacSHA256(k, terminator)
}

// stringToSign builds the string to sign of a request (not of a chunk).
func stringToSign(amzDate, scope, canonicalRequest string) string {
	return algorithm + "\n" + amzDate + "\n" + scope + "\n" + sha256Hex(canonicalRequest)
}

// signatureMatches compares a computed signature with the one sent in
// constant time.
func signatureMatches(key []byte, sts, sent string) bool {
	got := hex.EncodeToString(hmacSHA256(key, sts))
	return hmac.Equal([]byte(got), []byte(sent))
}

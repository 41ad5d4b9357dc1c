package auth

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/kelpfs/kelp/internal/fid"
)

func TestSignerVerify(t *testing.T) {
	s := NewSigner("k1-secret", time.Minute)
	id := fid.FileID{Volume: 3, Key: 0x100, Cookie: 0xdeadbeef}
	tok := s.Sign(id, 1)
	if err := s.Verify(tok, id); err != nil {
		t.Fatalf("own token refused: %v", err)
	}
	other := id
	other.Key++
	cookie := id
	cookie.Cookie++
	vol := id
	vol.Volume++
	expired, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"fid": id.String(), "exp": time.Now().Add(-time.Hour).Unix()}).SignedString([]byte("k1-secret"))
	noExp, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"fid": id.String()}).SignedString([]byte("k1-secret"))
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"fid": id.String(), "exp": time.Now().Add(time.Hour).Unix()}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	for name, c := range map[string]struct {
		tok string
		id  fid.FileID
	}{
		"empty": {"", id}, "another key": {tok, other}, "another cookie": {tok, cookie}, "another volume": {tok, vol},
		"expired": {expired, id}, "no expiry": {noExp, id}, "alg none": {none, id},
		"forged": {NewSigner("k2", time.Minute).Sign(id, 1), id}, "garbage": {"a.b.c", id},
		"server token": {s.ServerToken(), id},
	} {
		err := s.Verify(c.tok, c.id)
		if !errors.Is(err, ErrUnauthorized) {
			t.Errorf("%s: %v, want ErrUnauthorized", name, err)
		} else if c.tok != "" && strings.Contains(err.Error(), c.tok) {
			t.Errorf("%s: the error carries the token", name)
		}
	}
	// A block of keys: any key of the range, any cookie; not past it.
	block := s.Sign(id, 4)
	for k := uint64(0); k < 4; k++ {
		if err := s.Verify(block, fid.FileID{Volume: 3, Key: 0x100 + k, Cookie: 7}); err != nil {
			t.Errorf("key %d of the block: %v", k, err)
		}
	}
	if err := s.Verify(block, fid.FileID{Volume: 3, Key: 0x104, Cookie: 7}); err == nil {
		t.Error("a key past the block accepted")
	}
	if err := s.VerifyServer(s.ServerToken()); err != nil {
		t.Errorf("server token: %v", err)
	}
	if err := s.VerifyServer(tok); err == nil {
		t.Error("a file token accepted as a server token")
	}
	var off *Signer
	if off.Sign(id, 1) != "" || off.Verify("", id) != nil {
		t.Error("a nil signer must sign nothing and accept everything")
	}
}

func TestAccessHTTPAndAudit(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens")
	os.WriteFile(file, []byte("# c\nalice rw aaaaaaaaaaaaaaaaaaaa\nbob ro bbbbbbbbbbbbbbbbbbbb\n"), 0o600)
	signer := NewSigner("key", time.Minute)
	a, err := NewAccess(file, signer)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	writes := 0
	h := a.HTTP("filer", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "PUT" {
			writes++
		}
		w.WriteHeader(201)
	}), func(r *http.Request) Role {
		if r.Method == "GET" {
			return RoleRead
		}
		return RoleWrite
	}, NewAudit(&log))
	for _, c := range []struct {
		method, tok string
		want        int
	}{
		{"PUT", "", 401}, {"PUT", "wrongwrongwrongwrong", 401}, {"PUT", "bbbbbbbbbbbbbbbbbbbb", 403},
		{"GET", "", 401}, {"GET", "bbbbbbbbbbbbbbbbbbbb", 201}, {"PUT", "aaaaaaaaaaaaaaaaaaaa", 201},
		{"PUT", signer.ServerToken(), 201},
	} {
		r := httptest.NewRequest(c.method, "/x", nil)
		if c.tok != "" {
			r.Header.Set("Authorization", "Bearer "+c.tok)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("%s with %q: %d, want %d", c.method, c.tok, w.Code, c.want)
		}
	}
	if writes != 2 {
		t.Errorf("%d writes reached the handler, want 2", writes)
	}
	out := log.String()
	for _, want := range []string{`"who":"alice","role":"rw"`, `"who":"server"`, `"status":401`, `"status":403`} {
		if !strings.Contains(out, want) {
			t.Errorf("audit log lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "aaaaaaaaaaaaaaaaaaaa") || strings.Contains(out, "bbbbbbbbbbbbbbbbbbbb") {
		t.Error("a token in the audit log")
	}
	if _, ok := a.FromGRPC(context.Background()); ok {
		t.Error("a gRPC call without metadata authenticated")
	}
	if _, err := NewAccess(filepath.Join(dir, "missing"), nil); err == nil {
		t.Error("a missing tokens file accepted")
	}
	os.WriteFile(file, []byte("alice superuser aaaaaaaaaaaaaaaaaaaa\n"), 0o600)
	if _, err := NewAccess(file, nil); err == nil {
		t.Error("a bad role accepted")
	}
}

func TestLoadOrCreateSecrets(t *testing.T) {
	dir := t.TempDir()
	s1, err := LoadOrCreateSecrets(dir)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := LoadOrCreateSecrets(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s1 != s2 || s1.SigningKey == "" || s1.AdminToken == "" {
		t.Fatalf("secrets changed between starts or are empty")
	}
	for _, f := range []string{"jwt-signing.key", "admin.token", "access-tokens"} {
		fi, err := os.Stat(filepath.Join(dir, "security", f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v mode %v, want 0600", f, err, fi.Mode().Perm())
		}
	}
	a, err := NewAccess(s1.TokensFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := a.token(s1.AdminToken); !ok || id.Role != RoleWrite {
		t.Errorf("the admin token is not read-write in the tokens file: %v %v", id, ok)
	}
}

// BenchmarkSignVerify is the CPU cost signed file ids add per write: one
// signature on the master, one check on the volume server.
func BenchmarkSignVerify(b *testing.B) {
	s := NewSigner("bench-key", time.Minute)
	id := fid.FileID{Volume: 1, Key: 42, Cookie: 7}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := s.Verify(s.Sign(id, 1), id); err != nil {
			b.Fatal(err)
		}
	}
}

// TestMTLSIdentity: a verified client certificate counts as a read-write
// server identity, over HTTP and gRPC; an unverified one does not.
func TestMTLSIdentity(t *testing.T) {
	a, _ := NewAccess("", NewSigner("k", time.Minute))
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: "volume-7"}}
	r := httptest.NewRequest("PUT", "/x", nil)
	r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}
	if id, ok := a.FromHTTP(r); !ok || id.Role != RoleWrite || id.Name != "mtls:volume-7" {
		t.Errorf("HTTP: %v %v", id, ok)
	}
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}} // presented, not verified
	if _, ok := a.FromHTTP(r); ok {
		t.Error("an unverified certificate authenticated")
	}
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)},
		AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}}})
	if id, ok := a.FromGRPC(ctx); !ok || id.Role != RoleWrite {
		t.Errorf("gRPC: %v %v", id, ok)
	}
}

// TestSignerKeyFileRotation walks the documented rotation of the signing
// key through one key file per server, without a restart: the new key is
// first accepted everywhere, then signs, then the old one is removed.
func TestSignerKeyFileRotation(t *testing.T) {
	defer func(d time.Duration) { ReloadInterval = d }(ReloadInterval)
	ReloadInterval = 0
	dir := t.TempDir()
	oldKey, newKey := "old-"+NewToken(), "new-"+NewToken()
	// Two servers: a signs (a master), b verifies (a volume server).
	fa, fb := filepath.Join(dir, "a.key"), filepath.Join(dir, "b.key")
	write := func(f string, keys ...string) {
		t.Helper()
		tmp := f + ".tmp"
		if err := os.WriteFile(tmp, []byte(strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		// A new modification time even within the file system's granularity.
		st, _ := os.Stat(f)
		if st != nil {
			os.Chtimes(tmp, time.Now(), st.ModTime().Add(time.Second))
		}
		if err := os.Rename(tmp, f); err != nil {
			t.Fatal(err)
		}
	}
	write(fa, oldKey)
	write(fb, oldKey)
	a, err := NewSignerFile(fa, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSignerFile(fb, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	id := fid.FileID{Volume: 1, Key: 2, Cookie: 3}
	ok := func(step string, from, to *Signer) {
		t.Helper()
		if err := to.Verify(from.Sign(id, 1), id); err != nil {
			t.Errorf("%s: file token refused: %v", step, err)
		}
		if err := to.VerifyServer(from.ServerToken()); err != nil {
			t.Errorf("%s: server token refused: %v", step, err)
		}
	}
	ok("start", a, b)
	oldTok, oldSrv := a.Sign(id, 1), a.ServerToken()

	// 1. The new key is added as the second line everywhere: still the old one signs.
	write(fa, oldKey, newKey)
	write(fb, oldKey, newKey)
	ok("new key accepted", a, b)
	ok("new key accepted", b, a)
	if err := NewSigner(oldKey, 0).Verify(a.Sign(id, 1), id); err != nil {
		t.Errorf("the second line signs: %v", err)
	}
	// 2. The new key moves first on a, which signs with it; b, not yet
	// swapped, accepts it, and a still accepts b's old-key tokens.
	write(fa, newKey, oldKey)
	if err := NewSigner(newKey, 0).Verify(a.Sign(id, 1), id); err != nil {
		t.Errorf("after the swap the new key does not sign: %v", err)
	}
	if err := NewSigner(newKey, 0).VerifyServer(a.ServerToken()); err != nil {
		t.Errorf("after the swap the server token is still the old key's: %v", err)
	}
	ok("swapped on a only", a, b)
	ok("swapped on a only", b, a)
	write(fb, newKey, oldKey)
	if err := b.Verify(oldTok, id); err != nil {
		t.Errorf("a token of the previous key refused inside the window: %v", err)
	}
	// 3. The old key is removed: its tokens are refused.
	write(fa, newKey)
	write(fb, newKey)
	ok("old key removed", a, b)
	if err := b.Verify(oldTok, id); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("a token of the removed key: %v, want ErrUnauthorized", err)
	}
	if err := b.VerifyServer(oldSrv); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("a server token of the removed key: %v, want ErrUnauthorized", err)
	}
	// A broken version (three keys, or empty) is refused whole; the loaded keys stay.
	write(fb, "x-"+NewToken(), "y-"+NewToken(), "z-"+NewToken())
	ok("broken key file", a, b)
	write(fb, "")
	ok("empty key file", a, b)
	if _, err := NewSignerFile(filepath.Join(dir, "missing"), 0); err == nil {
		t.Error("a missing key file accepted")
	}
}

// TestAccessTokensReload: the tokens file is re-read when it changes: an
// added token is accepted, a removed one refused, tokens added in process
// stay, and a file that does not parse leaves the previous tokens in force.
func TestAccessTokensReload(t *testing.T) {
	defer func(d time.Duration) { ReloadInterval = d }(ReloadInterval)
	ReloadInterval = 0
	f := filepath.Join(t.TempDir(), "tokens")
	oldTok, newTok, inproc := "old-"+NewToken(), "new-"+NewToken(), "inproc-"+NewToken()
	write := func(body string) {
		t.Helper()
		st, _ := os.Stat(f)
		if err := os.WriteFile(f+".tmp", []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if st != nil {
			os.Chtimes(f+".tmp", time.Now(), st.ModTime().Add(time.Second))
		}
		if err := os.Rename(f+".tmp", f); err != nil {
			t.Fatal(err)
		}
	}
	write("alice rw " + oldTok + "\n")
	a, err := NewAccess(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.Add(inproc, "gateway", RoleWrite)
	who := func(tok string) string {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		id, ok := a.FromHTTP(r)
		if !ok {
			return ""
		}
		return id.Name + ":" + id.Role.String()
	}
	if who(oldTok) != "alice:rw" || who(newTok) != "" || who(inproc) != "gateway:rw" {
		t.Fatalf("start: %q %q %q", who(oldTok), who(newTok), who(inproc))
	}
	write("alice rw " + oldTok + "\nbob ro " + newTok + "\n")
	if who(newTok) != "bob:ro" {
		t.Errorf("an added token: %q, want bob:ro", who(newTok))
	}
	write("bob rw " + newTok + "\n")
	if who(oldTok) != "" || who(newTok) != "bob:rw" || who(inproc) != "gateway:rw" {
		t.Errorf("after removing alice: %q %q %q", who(oldTok), who(newTok), who(inproc))
	}
	write("bob rw short\n")
	if who(newTok) != "bob:rw" {
		t.Errorf("a broken file replaced the tokens: %q", who(newTok))
	}
}

// TestAdminTokenVouched: a master's admin token carries the identity it
// vouches for; only an Access that accepts vouched tokens takes it; it is
// neither a server token nor a file token, and another key's is refused.
func TestAdminTokenVouched(t *testing.T) {
	s := NewSigner("vouch-key-0123456789", time.Minute)
	tok := s.AdminToken(Identity{Name: "alice", Role: RoleRead})
	if id, err := s.VerifyAdmin(tok); err != nil || id.Name != "vouched:alice" || id.Role != RoleRead {
		t.Fatalf("VerifyAdmin: %+v %v", id, err)
	}
	if s.VerifyServer(tok) == nil || s.Verify(tok, fid.FileID{Volume: 1, Key: 1}) == nil {
		t.Error("an admin token passes as a server or file token")
	}
	if _, err := s.VerifyAdmin(s.ServerToken()); err == nil {
		t.Error("a server token passes as an admin token")
	}
	if _, err := s.VerifyAdmin(NewSigner("other-key-0123456789", 0).AdminToken(Identity{Name: "x", Role: RoleWrite})); err == nil {
		t.Error("another key's admin token accepted")
	}
	who := func(a *Access) bool {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		_, ok := a.FromHTTP(r)
		return ok
	}
	a, _ := NewAccess("", s)
	if who(a) {
		t.Error("an Access not accepting vouched tokens took one")
	}
	if !who(a.AcceptVouched()) {
		t.Error("AcceptVouched: the admin token refused")
	}
}

// TestTokensInteroperate: the tokens Kelp signs are standard HS256 JWTs
// (a JWT library reads them, and Kelp reads that library's tokens: a
// cluster mid-upgrade mixes both), and what a strict JWT check refuses is
// refused, the signature looked at before anything else.
func TestTokensInteroperate(t *testing.T) {
	const key = "interop-key"
	s := NewSigner(key, time.Minute)
	id := fid.FileID{Volume: 9, Key: 0x2a, Cookie: 0x1234}
	lib := jwt.NewParser(jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired())
	var mc jwt.MapClaims
	if _, err := lib.ParseWithClaims(s.Sign(id, 3), &mc, func(*jwt.Token) (any, error) { return []byte(key), nil }); err != nil {
		t.Fatalf("a JWT library refuses Kelp's token: %v", err)
	}
	if mc["fid"] != id.String() || mc["n"] != 3.0 {
		t.Errorf("claims %v", mc)
	}
	libSign := func(m jwt.SigningMethod, k any, c jwt.MapClaims) string {
		tok, err := jwt.NewWithClaims(m, c).SignedString(k)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	soon := time.Now().Add(time.Minute)
	for name, c := range map[string]jwt.MapClaims{
		"integer exp":  {"fid": id.String(), "exp": soon.Unix()},
		"fraction exp": {"fid": id.String(), "exp": float64(soon.UnixNano()) / 1e9},
		"past nbf":     {"fid": id.String(), "exp": soon.Unix(), "nbf": time.Now().Add(-time.Minute).Unix()},
		"other claims": {"fid": id.String(), "exp": soon.Unix(), "iss": "x", "jti": "y"},
	} {
		if err := s.Verify(libSign(jwt.SigningMethodHS256, []byte(key), c), id); err != nil {
			t.Errorf("%s: a library token refused: %v", name, err)
		}
	}
	good := s.Sign(id, 1)
	dot1, dot2 := strings.IndexByte(good, '.'), strings.LastIndexByte(good, '.')
	flip := func(tok string, i int) string {
		b := []byte(tok)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	hs384 := libSign(jwt.SigningMethodHS384, []byte(key), jwt.MapClaims{"fid": id.String(), "exp": soon.Unix()})
	// A header that claims another algorithm over an HS256 signature.
	hdr384 := strings.TrimRight(base64URL(`{"alg":"HS384","typ":"JWT"}`), "=")
	for name, tok := range map[string]string{
		"HS384":               hs384,
		"alg none":            libSign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.MapClaims{"fid": id.String(), "exp": soon.Unix()}),
		"header claims HS384": resign(hdr384+good[dot1:dot2], key),
		"payload changed":     flip(good, dot1+5),
		"signature changed":   flip(good, dot2+3),
		"signature cut":       good[:len(good)-2],
		"signature padded":    good + "=",
		"four parts":          good + ".x",
		"two parts":           good[:dot2],
		"future nbf":          libSign(jwt.SigningMethodHS256, []byte(key), jwt.MapClaims{"fid": id.String(), "exp": soon.Unix(), "nbf": soon.Unix()}),
		"expired":             libSign(jwt.SigningMethodHS256, []byte(key), jwt.MapClaims{"fid": id.String(), "exp": time.Now().Add(-3 * time.Second).Unix()}),
		"exp not a number":    libSign(jwt.SigningMethodHS256, []byte(key), jwt.MapClaims{"fid": id.String(), "exp": "soon"}),
		"claims not JSON":     resign(good[:dot1+1]+strings.TrimRight(base64URL("fid"), "="), key),
	} {
		if err := s.Verify(tok, id); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("%s: %v, want ErrUnauthorized", name, err)
		}
	}
	// A second of leeway for the clocks of two servers, as before; a
	// fraction of a second in "exp" or "nbf" is cut off, as before.
	exp := time.Now().Truncate(time.Second).Add(time.Minute)
	for _, c := range []struct {
		exp, nbf any
		now      time.Time
		ok       bool
	}{
		{exp.Unix(), nil, exp.Add(999 * time.Millisecond), true},
		{exp.Unix(), nil, exp.Add(time.Second), false},
		{float64(exp.Unix()) + 0.9, nil, exp.Add(time.Second), false},
		{exp.Unix(), exp.Unix() - 10, exp.Add(-11 * time.Second), true},
		{exp.Unix(), exp.Unix() - 10, exp.Add(-11*time.Second - time.Millisecond), false},
		{exp.Unix(), float64(exp.Unix()-10) + 0.9, exp.Add(-11 * time.Second), true},
	} {
		mc := jwt.MapClaims{"fid": id.String(), "exp": c.exp}
		if c.nbf != nil {
			mc["nbf"] = c.nbf
		}
		var fc fileClaims
		err := verifyHS256(libSign(jwt.SigningMethodHS256, []byte(key), mc), []*macKey{newMACKey([]byte(key))}, &fc, c.now)
		if (err == nil) != c.ok {
			t.Errorf("exp %v nbf %v at exp%+v: %v, want ok=%v", c.exp, c.nbf, c.now.Sub(exp), err, c.ok)
		}
	}
}

func base64URL(s string) string { return base64.URLEncoding.EncodeToString([]byte(s)) }

// resign signs the header and claims segments of tok with key (HS256).
func resign(signingInput, key string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(signingInput))
	return signingInput + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

package localread

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/needle"
)

// serve listens at the socket of a made-up server address and returns it.
func serve(t *testing.T, lookup Lookup) (addr string) {
	t.Helper()
	if !supported {
		t.Skip("no SO_PEERCRED on this system")
	}
	addr = fmt.Sprintf("test-%d-%s:1", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "_"))
	s, err := Listen(SocketPath(addr), lookup, nil)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	t.Cleanup(s.Close)
	return addr
}

// readAll reads fid through r from the server at addr.
func readAll(t *testing.T, r *Reader, addr, fid string, off, n int64, verify bool) string {
	t.Helper()
	rc, _, err := r.Open(addr, fid, off, n, verify)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAnswers(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "dat"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := "hello, file"
	f.WriteString("head" + data + "tail")
	crc := needle.CRC([]byte(data))
	addr := serve(t, func(fid string, off, n int64) (Answer, bool) {
		switch fid {
		case "inline":
			d := []byte("hello, inline")
			end := int64(len(d))
			if n >= 0 {
				end = min(end, off+n)
			}
			return Answer{Header: Header{Size: int64(len(d))}, Data: d[off:end]}, true
		case "empty":
			return Answer{Header: Header{Size: 0}, Data: []byte{}}, true
		case "file":
			return Answer{Header: Header{Size: int64(len(data)), FileOff: 4, CRC: crc}, File: f}, true
		case "corrupt":
			return Answer{Header: Header{Size: int64(len(data)), FileOff: 4, CRC: crc + 1}, File: f}, true
		}
		return Answer{}, false
	})
	r := NewReader()
	defer r.Close()
	if got := readAll(t, r, addr, "inline", 7, -1, true); got != "inline" {
		t.Errorf("inline = %q", got)
	}
	if got := readAll(t, r, addr, "empty", 0, -1, true); got != "" {
		t.Errorf("empty = %q", got)
	}
	if got := readAll(t, r, addr, "file", 0, -1, true); got != data {
		t.Errorf("file = %q", got)
	}
	if got := readAll(t, r, addr, "file", 7, 2, true); got != "fi" {
		t.Errorf("file range = %q", got)
	}
	if _, _, err := r.Open(addr, "other", 0, -1, true); !errors.Is(err, ErrFallback) {
		t.Errorf("unknown needle: %v, want ErrFallback", err)
	}
	if _, _, err := r.Open(addr, "file", 11, -1, true); !errors.Is(err, ErrFallback) {
		t.Errorf("offset at the end: %v, want ErrFallback (HTTP's 416)", err)
	}
	rc, _, err := r.Open(addr, "corrupt", 0, -1, true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if !errors.Is(err, needle.ErrCorrupt) || len(b) == len(data) {
		t.Errorf("corrupt: %q, %v", b, err)
	}
	if got := readAll(t, r, addr, "corrupt", 0, -1, false); got != data {
		t.Errorf("corrupt, unverified = %q", got)
	}
	if _, _, err := r.Open("nobody-listens:1", "file", 0, -1, true); !errors.Is(err, ErrFallback) {
		t.Errorf("no server: %v, want ErrFallback", err)
	}
}

func TestMalformedRequestEndsOnlyItsConnection(t *testing.T) {
	addr := serve(t, func(string, int64, int64) (Answer, bool) {
		return Answer{Header: Header{Size: 2}, Data: []byte("ok")}, true
	})
	for _, bad := range []string{"x\n", "f -1 5\n", "f 0 0\n", "f a b\n", strings.Repeat("f", 300) + "\n"} {
		c, err := net.Dial("unix", SocketPath(addr))
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte(bad))
		if n, err := c.Read(make([]byte, 10)); err == nil {
			t.Errorf("request %.20q answered %d bytes", bad, n)
		}
		c.Close()
	}
	r := NewReader()
	defer r.Close()
	if got := readAll(t, r, addr, "f", 0, -1, true); got != "ok" {
		t.Fatalf("after bad requests: %q", got)
	}
}

// TestSocketNameIsHeldByOneServerOnly: the abstract socket's name is taken
// by one server at a time, is free again once it closes, and is no file;
// Serves tells a held name from a free one.
func TestSocketNameIsHeldByOneServerOnly(t *testing.T) {
	if !supported {
		t.Skip("no SO_PEERCRED on this system")
	}
	addr := fmt.Sprintf("held-%d:1", os.Getpid())
	name := SocketPath(addr)
	if !strings.HasPrefix(name, "@") {
		t.Fatalf("SocketPath(%q) = %q, not an abstract name", addr, name)
	}
	r := NewReader()
	defer r.Close()
	if r.Serves(addr) {
		t.Fatal("Serves before any server holds the name")
	}
	s, err := Listen(name, func(string, int64, int64) (Answer, bool) { return Answer{}, false }, nil)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	if _, err := Listen(name, nil, nil); err == nil {
		t.Fatal("a second server took a name in use")
	}
	if _, err := os.Stat(name); !os.IsNotExist(err) {
		t.Fatalf("a file named %s: %v", name, err)
	}
	if r2 := NewReader(); !r2.Serves(addr) {
		t.Fatal("Serves is false while a server holds the name")
	} else {
		r2.Close()
	}
	s.Close()
	s2, err := Listen(name, nil, nil)
	if err != nil {
		t.Fatalf("the name is not free after Close: %v", err)
	}
	s2.Close()
}

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

func TestListenReplacesOnlyAStaleSocket(t *testing.T) {
	if !supported {
		t.Skip("no SO_PEERCRED on this system")
	}
	path := SocketPath(fmt.Sprintf("stale-%d:1", os.Getpid()))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(path, nil, nil); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("Listen over a live socket: %v", err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close() // as a crashed server leaves it
	s, err := Listen(path, nil, nil)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, %v; want 0600", fi.Mode(), err)
	}
	s.Close()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("socket left after Close: %v", err)
	}
	os.WriteFile(path, nil, 0o600)
	defer os.Remove(path)
	if _, err := Listen(path, nil, nil); err == nil {
		t.Fatal("Listen replaced a regular file")
	}
}

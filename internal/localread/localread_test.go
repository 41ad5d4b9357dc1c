package localread

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
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

// asNobody runs a Python script as user nobody (the test must run as
// root, as CI does); it skips the test when it cannot.
func asNobody(t *testing.T, script string, args ...string) *exec.Cmd {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	for _, p := range []string{"/usr/sbin/runuser", "/usr/bin/python3"} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("%s: %v", p, err)
		}
	}
	return exec.Command("/usr/sbin/runuser", append([]string{"-u", "nobody", "--", "/usr/bin/python3", "-c", script}, args...)...)
}

// TestAnotherUserIsRefused: any local user can connect to an abstract
// socket, so each end checks the other's user: the server answers nothing
// to a process of another user, and a reader does not take a socket that
// another user's process holds for a server.
func TestAnotherUserIsRefused(t *testing.T) {
	if !supported {
		t.Skip("no SO_PEERCRED on this system")
	}
	var asked atomic.Int64
	addr := serve(t, func(string, int64, int64) (Answer, bool) {
		asked.Add(1)
		return Answer{Header: Header{Size: 2}, Data: []byte("ok")}, true
	})
	client := asNobody(t, `
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect("\0" + sys.argv[1][1:])
try:
    s.sendall(b"f 0 -1\n")
    print(len(s.recv(100)))
except ConnectionError:  # closed unanswered
    print(0)
`, SocketPath(addr))
	out, err := client.CombinedOutput()
	if err != nil {
		t.Fatalf("the other user's client: %v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "0" || asked.Load() != 0 {
		t.Fatalf("another user got %s bytes, lookups %d; want 0 and 0", got, asked.Load())
	}

	squatted := fmt.Sprintf("squat-%d:1", os.Getpid())
	server := asNobody(t, `
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind("\0" + sys.argv[1][1:])
s.listen(8)
print("listening", flush=True)
sys.stdin.read()
`, SocketPath(squatted))
	stdin, err := server.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); server.Wait() }()
	line := make([]byte, 10)
	if _, err := io.ReadFull(stdout, line); err != nil || string(line) != "listening\n" {
		t.Fatalf("the other user's server: %q, %v", line, err)
	}
	r := NewReader()
	defer r.Close()
	if r.Serves(squatted) {
		t.Fatal("a reader took a socket that another user holds")
	}
	if _, _, err := r.Open(squatted, "f", 0, -1, true); !errors.Is(err, ErrFallback) {
		t.Fatalf("a read from another user's socket: %v, want ErrFallback", err)
	}
}

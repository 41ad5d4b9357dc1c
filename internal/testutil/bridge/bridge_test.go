package bridge

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/testutil"
)

// echo starts a line echo server and returns its address.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func start(t *testing.T) (*Bridge, net.Conn, *bufio.Reader) {
	t.Helper()
	b, err := New(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	c, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return b, c, bufio.NewReader(c)
}

func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, line string) {
	t.Helper()
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := r.ReadString('\n')
	if err != nil || got != line+"\n" {
		t.Fatalf("echo of %q: %q %v", line, got, err)
	}
}

// silent checks that nothing arrives for a while: the one place a bridge
// test must wait a fixed time, since it checks that something does not happen.
func silent(t *testing.T, c net.Conn, r *bufio.Reader) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(150 * time.Millisecond))
	got, err := r.ReadString('\n')
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read through a stopped bridge: %q %v", got, err)
	}
}

func TestForwardPauseResume(t *testing.T) {
	b, c, r := start(t)
	roundTrip(t, c, r, "one")
	b.Pause()
	if _, err := c.Write([]byte("held\n")); err != nil {
		t.Fatal(err)
	}
	silent(t, c, r)
	b.Resume()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "held\n" {
		t.Fatalf("held bytes after resume: %q %v", got, err)
	}
	roundTrip(t, c, r, "two")
}

func TestPauseHoldsNewConnections(t *testing.T) {
	b, c, r := start(t)
	roundTrip(t, c, r, "warm")
	b.Pause()
	c2, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	r2 := bufio.NewReader(c2)
	c2.Write([]byte("late\n"))
	silent(t, c2, r2)
	b.Resume()
	c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := r2.ReadString('\n'); err != nil || got != "late\n" {
		t.Fatalf("new connection after resume: %q %v", got, err)
	}
}

func TestBlackholeLosesBytes(t *testing.T) {
	b, c, r := start(t)
	roundTrip(t, c, r, "one")
	b.Blackhole()
	c.Write([]byte("lost\n"))
	silent(t, c, r)
	b.Resume()
	roundTrip(t, c, r, "two") // "lost" never reached the server
}

func TestDropCutsConnections(t *testing.T) {
	b, c, r := start(t)
	roundTrip(t, c, r, "one")
	testutil.WaitFor(t, 5*time.Second, func() bool { return b.Conns() == 1 }, "conns %d", b.Conns())
	b.Drop()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadString('\n'); !errors.Is(err, io.EOF) {
		t.Fatalf("read after drop: %v, want EOF", err)
	}
	testutil.WaitFor(t, 5*time.Second, func() bool { return b.Conns() == 0 }, "conns %d", b.Conns())
	// New connections work again.
	c2, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	roundTrip(t, c2, bufio.NewReader(c2), "again")
	if b.Accepted() != 2 {
		t.Fatalf("accepted %d", b.Accepted())
	}
}

func TestCloseEndsEverything(t *testing.T) {
	b, c, r := start(t)
	roundTrip(t, c, r, "one")
	b.Pause()
	c.Write([]byte("held\n"))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", b.Addr(), time.Second); err == nil {
		t.Fatal("bridge still listening after Close")
	}
}

// Package testutil holds what every test shares: the one gate that lets a
// test skip because something it needs is missing (KELP_TEST_ALLOW_SKIP),
// condition waits, and ports for servers that must know them before they
// start. It uses only the standard library, so tests of core packages may
// import it too. Only tests import it.
package testutil

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// AllowSkipEnv is the variable that lets tests skip for a missing tool or
// service instead of failing.
const AllowSkipEnv = "KELP_TEST_ALLOW_SKIP"

// SkipOrFail is how a test gives up because something it needs (a client
// tool, a database, a service) is missing. It fails the test, so that CI never
// passes without running it, unless KELP_TEST_ALLOW_SKIP=1, which turns it
// into a skip for a developer's machine without those things.
func SkipOrFail(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(AllowSkipEnv) == "1" {
		tb.Skipf("%s (%s=1)", msg, AllowSkipEnv)
	}
	tb.Fatalf("%s; run scripts/test-deps.sh, or set %s=1 to skip", msg, AllowSkipEnv)
}

// Eventually polls cond every few milliseconds until it is true (and
// returns true) or within has passed (and returns false). Callers fail with
// the state they see then:
//
//	if !testutil.Eventually(5*time.Second, func() bool { return n() >= 50 }) {
//		t.Fatalf("only %d writes acknowledged", n())
//	}
func Eventually(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// WaitFor is Eventually that fails tb with the message when cond never
// holds.
func WaitFor(tb testing.TB, within time.Duration, cond func() bool, format string, args ...any) {
	tb.Helper()
	if !Eventually(within, cond) {
		tb.Fatalf("after %v: "+format, append([]any{within}, args...)...)
	}
}

// Servers whose ports follow a convention (gRPC = HTTP + 10000, raft = HTTP
// + 20000) cannot listen on :0, and processes started by tests must be told
// their ports. Such ports are picked below the kernel's ephemeral range
// (32768 and up on Linux): the kernel never hands those out to outgoing
// connections, so a port stays free while its server is stopped for a
// restart. Two tests may still pick the same port at the same moment; the
// server that loses fails with "address already in use" and its test starts
// it again on fresh ports (see AddrInUse).
const (
	portLow  = 2000
	portHigh = 32768 // the start of Linux's default ephemeral range
)

// FreePort returns a port p such that p+o is free on 127.0.0.1 right now for
// every offset o (0 is always included) and p+o is below the ephemeral
// range.
func FreePort(tb testing.TB, offsets ...int) int {
	tb.Helper()
	maxOff := 0
	for _, o := range offsets {
		maxOff = max(maxOff, o)
	}
	if portLow+maxOff >= portHigh {
		tb.Fatalf("testutil: offset %d leaves no port below %d", maxOff, portHigh)
	}
	for range 1000 {
		p := portLow + rand.IntN(portHigh-maxOff-portLow)
		if free(p) && allFree(p, offsets) {
			return p
		}
	}
	tb.Fatal("testutil: no free port")
	return 0
}

// FreePorts returns n distinct ports as FreePort does, none of them equal
// to another's p+o.
func FreePorts(tb testing.TB, n int, offsets ...int) []int {
	tb.Helper()
	taken := map[int]bool{}
	var out []int
	for len(out) < n {
		p := FreePort(tb, offsets...)
		clash := taken[p]
		for _, o := range offsets {
			clash = clash || taken[p+o]
		}
		if clash {
			continue
		}
		taken[p] = true
		for _, o := range offsets {
			taken[p+o] = true
		}
		out = append(out, p)
	}
	return out
}

func allFree(p int, offsets []int) bool {
	for _, o := range offsets {
		if o != 0 && !free(p+o) {
			return false
		}
	}
	return true
}

func free(port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// AddrInUse reports whether err (or a server's log) says that a port was
// taken: the one failure a start on fresh ports cures.
func AddrInUse(err error) bool {
	return err != nil && (errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use"))
}

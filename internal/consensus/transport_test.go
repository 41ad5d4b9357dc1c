package consensus

import (
	"net"
	"sync/atomic"
	"testing"
)

// TestDrainWaitsForConnectionHandlers: drain returns only after the handler
// of every accepted connection has closed it, so that the log store is
// never closed under a heartbeat raft is still answering.
func TestDrainWaitsForConnectionHandlers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &streamLayer{Listener: ln, advertise: ln.Addr(), dial: tcpDialer(nil), open: map[*servedConn]struct{}{}}
	defer s.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	conn, err := s.Accept()
	if err != nil {
		t.Fatal(err)
	}
	var handled atomic.Bool
	go func() {
		// A handler like raft's: it reads until the connection fails, does
		// its last work, and closes the connection as it returns.
		buf := make([]byte, 1)
		for {
			if _, err := conn.Read(buf); err != nil {
				break
			}
		}
		handled.Store(true)
		conn.Close()
	}()
	s.drain()
	if !handled.Load() {
		t.Fatal("drain returned before the connection's handler ended")
	}
}

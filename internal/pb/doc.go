// Package pb holds Kelp's protobuf definitions (*.proto, generated into masterpb and
// volumepb by `make proto`) and the conventions shared by every gRPC endpoint.
//
// Imported only by services and internal/client: core packages never see wire types.
package pb

import (
	"net"
	"strconv"
)

// GRPCPortOffset is added to a server's HTTP port to find its gRPC port, so one
// host:port names a server everywhere on the command line. RaftPortOffset does
// the same for a master's Raft transport.
const (
	GRPCPortOffset = 10000
	RaftPortOffset = 20000
)

// DerivedPort is httpPort+offset, or httpPort-offset when the sum would not be
// a valid port: HTTP ports picked from the ephemeral range (32768-60999) are
// common in tests and scripts, and +10000 or +20000 runs past 65535 for many
// of them. Port 0 (pick any) stays 0.
func DerivedPort(httpPort, offset int) int {
	switch {
	case httpPort == 0:
		return 0
	case httpPort+offset <= 65535:
		return httpPort + offset
	default:
		return httpPort - offset
	}
}

// GRPCPort is the gRPC port of a server whose HTTP port is httpPort.
func GRPCPort(httpPort int) int { return DerivedPort(httpPort, GRPCPortOffset) }

// GRPCAddress turns a server's HTTP host:port into its gRPC host:port.
func GRPCAddress(httpAddr string) (string, error) {
	host, port, err := net.SplitHostPort(httpAddr)
	if err != nil {
		return "", err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, strconv.Itoa(GRPCPort(p))), nil
}

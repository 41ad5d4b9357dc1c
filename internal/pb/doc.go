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
// host:port names a server everywhere on the command line.
const GRPCPortOffset = 10000

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
	return net.JoinHostPort(host, strconv.Itoa(p+GRPCPortOffset)), nil
}

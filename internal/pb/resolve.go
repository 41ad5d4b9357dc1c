package pb

import "google.golang.org/grpc/resolver"

// Every gRPC connection resolves its server's name when it dials, each time
// it dials, through the operating system's resolver ("passthrough"), instead
// of gRPC's DNS resolver, which keeps the addresses it found and re-resolves
// only after a failure, at most every 30 s. Servers advertise names; when a
// name moves to another address (a container reconnected to its network)
// and its old address now belongs to another server, a reconnect to the
// kept address would reach the wrong server: a volume allocated for v3
// landed on v4 in test/docker before this.
func init() { resolver.SetDefaultScheme("passthrough") }

package master

import (
	"net/http"
	"strings"

	"github.com/kelpfs/kelp/internal/auth"
)

// With Config.Access set the master's mutating APIs need an access token
// with the read-write role (or a verified client certificate, or the
// server token of a JWT signing key holder): assign (it hands out write
// tokens), growth, configuration, the admin lock, volume failure reports,
// and heartbeats when file ids are signed (volume servers hold the key).
// Lookups, the topology and the status pages stay open: they carry no
// secret (tested: TestMasterStatusHasNoSecrets).

func httpNeed(r *http.Request) auth.Role {
	switch r.URL.Path {
	case "/dir/assign", "/cluster/configure", "/admin/lock", "/admin/unlock", "/vol/grow":
		return auth.RoleWrite
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return auth.RoleWrite
	}
	return auth.RoleNone
}

func (s *Server) grpcNeed(method string) auth.Role {
	name := method[strings.LastIndexByte(method, '/')+1:]
	switch name {
	case "Lookup", "ClusterStatus", "Topology":
		return auth.RoleNone
	case "Heartbeat":
		if !s.cfg.Signer.Enabled() {
			return auth.RoleNone
		}
	}
	return auth.RoleWrite
}

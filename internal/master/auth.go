package master

import (
	"net/http"
	"strings"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/fid"
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
	case "/dir/readtoken", "/admin/token":
		return auth.RoleRead
	case "/dir/assign", "/cluster/configure", "/admin/lock", "/admin/unlock", "/vol/grow":
		return auth.RoleWrite
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return auth.RoleWrite
	}
	return auth.RoleNone
}

// handleReadToken answers GET /dir/readtoken?fileId=FID with {"auth": a
// read token for FID} (the read-only role suffices), or 404 when this
// master holds no read key. Without Config.Access only a caller with a
// verified client certificate gets one (401 otherwise).
func (s *Server) handleReadToken(w http.ResponseWriter, r *http.Request) {
	id, err := fid.Parse(r.URL.Query().Get("fileId"))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "fileId: " + err.Error()})
		return
	}
	if !s.cfg.ReadSigner.Enabled() {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "reads are not signed"})
		return
	}
	if s.cfg.Access == nil && !verifiedPeer(r) {
		// Nothing else identifies the caller: a read token for anyone
		// would make the read key pointless.
		w.Header().Set("WWW-Authenticate", `Bearer realm="kelp"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "read tokens need an identity: this master has no access tokens (--access.tokens or --jwt.signing.key) and the request no verified client certificate"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"auth": s.cfg.ReadSigner.Sign(id, 1)})
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

// verifiedPeer reports whether r came with a client certificate the TLS
// configuration verified against the cluster CA.
func verifiedPeer(r *http.Request) bool {
	return r.TLS != nil && len(r.TLS.VerifiedChains) > 0
}

// handleAdminToken answers GET /admin/token with {"auth": a token vouching
// for the caller's identity and role} (auth.Signer.AdminToken), which
// volume servers take on their admin API: `kelp shell` with an access token
// of the masters reaches volume servers that do not have the tokens file.
// 404 when this master has no signing key (volume servers' admin API is
// then not authenticated by tokens); 401 for a caller with no identity.
func (s *Server) handleAdminToken(w http.ResponseWriter, r *http.Request) {
	if !s.cfg.Signer.Enabled() {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "file ids are not signed: no admin tokens"})
		return
	}
	id, ok := s.cfg.Access.FromHTTP(r)
	if !ok || s.cfg.Access == nil && !verifiedPeer(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="kelp"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "admin tokens need an identity: an access token or a verified client certificate"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"auth": s.cfg.Signer.AdminToken(id), "expiresInSeconds": int(auth.AdminTokenLife.Seconds())})
}

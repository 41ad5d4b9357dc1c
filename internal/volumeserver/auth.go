package volumeserver

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/fid"
)

// With Config.Signer set, writes and deletes need "Authorization: Bearer
// JWT": a file token from the master's assign bound to the file id, or the
// server token other key holders (volume servers forwarding to replicas,
// the master asking for a catch-up, the filer's garbage collection) show.
// The internal endpoints (/sync/*, /ec/* but /ec/routes) take the server
// token only. With Config.ReadSigner set, reads need a file token signed
// with the read key, or the server token. Refusals are 401 before anything
// is read or written.
func (s *Server) authorize(next http.Handler) http.Handler {
	if !s.cfg.Signer.Enabled() && !s.cfg.ReadSigner.Enabled() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.checkAuth(r); err != nil {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				s.cfg.Audit.Log(auth.Event{Service: "volume", Remote: auth.RemoteHost(r.RemoteAddr), Action: r.Method, Target: r.URL.Path, Status: http.StatusUnauthorized})
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="kelp-volume"`)
			writeError(w, http.StatusUnauthorized, err.Error())
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) checkAuth(r *http.Request) error {
	p := r.URL.Path
	if p == "/healthz" || p == "/status" || p == "/ec/routes" {
		return nil
	}
	tok := auth.Bearer(r.Header.Get("Authorization"))
	read := r.Method == http.MethodGet || r.Method == http.MethodHead
	if strings.HasPrefix(p, "/sync/") || strings.HasPrefix(p, "/ec/") {
		if !s.cfg.Signer.Enabled() {
			return nil
		}
		return s.cfg.Signer.VerifyServer(tok)
	}
	signer := s.cfg.Signer
	if read {
		signer = s.cfg.ReadSigner
	}
	if !signer.Enabled() {
		return nil
	}
	if s.cfg.Signer.Enabled() && auth.IsJWT(tok) && s.cfg.Signer.VerifyServer(tok) == nil {
		return nil
	}
	id, err := fid.Parse(strings.TrimPrefix(p, "/"))
	if err != nil {
		return nil // the handler answers 400
	}
	return signer.Verify(tok, id)
}

// adminAccess is who may call the admin gRPC API when file ids are signed:
// the holders of the signing key (server tokens: masters and peers),
// Config.Access's tokens and verified client certificates. Without signed
// file ids it is nil (open, unless mutual TLS checks the peers): a master
// then holds no credential every volume server accepts (access tokens are
// kept as digests, so it cannot present one), as with its heartbeats.
func (s *Server) adminAccess() (*auth.Access, error) {
	if !s.cfg.Signer.Enabled() {
		return nil, nil
	}
	if s.cfg.Access != nil {
		return s.cfg.Access.AcceptVouched(), nil
	}
	a, err := auth.NewAccess("", s.cfg.Signer)
	if err != nil {
		return nil, fmt.Errorf("volumeserver: %w", err)
	}
	return a.AcceptVouched(), nil
}

// grpcNeed: status and raw volume reads (a copy's source) need the
// read-only role; everything else on the admin API changes volumes and
// needs read-write.
func grpcNeed(method string) auth.Role {
	switch method[strings.LastIndexByte(method, '/')+1:] {
	case "VolumeStatus", "ReadVolumeFile", "EcVerify":
		return auth.RoleRead
	}
	return auth.RoleWrite
}

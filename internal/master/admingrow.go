package master

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/kelpfs/kelp/internal/security"
)

// GrowVolumes creates volumes for a collection (replication "" = the
// collection's or the cluster's default), as many as an automatic growth
// would: the admin UI's "create collection". A follower asks its leader
// with POST /vol/grow, marked as forwarded and under this master's own
// credentials (ownToken; its client certificate under mutual TLS): the
// request is the master's, not a client's whose token it could pass on.
func (s *Server) GrowVolumes(ctx context.Context, collection, replication string) ([]uint32, error) {
	if s.cons.IsLeader() {
		key, err := s.layoutKey(collection, replication, "")
		if err != nil {
			return nil, err
		}
		return s.grow(ctx, key, "", growCount(key.Replication, s.topo.DisksWithRoom("")))
	}
	leader := s.leader()
	if leader == "" || leader == s.httpAddr {
		return nil, s.notLeader()
	}
	q := url.Values{"collection": {collection}, "replication": {replication}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, security.URL(leader)+"/vol/grow?"+q.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("master: grow on the leader: %w", err)
	}
	req.Header.Set(forwardedHeader, s.httpAddr)
	if tok := s.ownToken(); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := s.leaderHTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: forwarding to %s: %v", ErrLeaderUnreachable, leader, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var body struct {
		VolumeIDs []uint32 `json:"volumeIds"`
		Error     string   `json:"error"`
	}
	json.Unmarshal(b, &body)
	if resp.StatusCode != http.StatusOK {
		msg := cmp.Or(body.Error, strings.TrimSpace(string(b)))
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			msg += " (this master shows the leader the server token of --jwt.signing.key, its --access.token, or its client certificate: give it one the leader accepts)"
		}
		return nil, fmt.Errorf("master: grow on the leader %s: %s: %s", leader, resp.Status, msg)
	}
	return body.VolumeIDs, nil
}

// ownToken is the bearer token this master shows other masters for its
// own requests: the server token when it holds the signing key (every
// server of the cluster takes it), else Config.AccessToken ("" none).
func (s *Server) ownToken() string {
	if s.cfg.Signer.Enabled() {
		return s.cfg.Signer.ServerToken()
	}
	return s.cfg.AccessToken
}

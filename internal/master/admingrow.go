package master

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
)

// GrowVolumes creates volumes for a collection (replication "" = the
// collection's or the cluster's default), as many as an automatic growth
// would: the admin UI's "create collection". A follower sends it through its leader proxy (the path /vol/grow
// takes), recorded in memory.
func (s *Server) GrowVolumes(ctx context.Context, collection, replication string) ([]uint32, error) {
	if s.cons.IsLeader() {
		key, err := s.layoutKey(collection, replication, "")
		if err != nil {
			return nil, err
		}
		return s.grow(ctx, key, "", growCount(key.Replication, s.topo.DisksWithRoom("")))
	}
	q := url.Values{"collection": {collection}, "replication": {replication}}
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/vol/grow?"+q.Encode(), nil)
	rec := httptest.NewRecorder()
	s.onLeader(s.handleGrow, nil)(rec, req)
	var body struct {
		VolumeIDs []uint32 `json:"volumeIds"`
		Error     string   `json:"error"`
	}
	json.Unmarshal(rec.Body.Bytes(), &body)
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("master: grow on the leader: %d %s", rec.Code, cmp.Or(body.Error, strings.TrimSpace(rec.Body.String())))
	}
	return body.VolumeIDs, nil
}

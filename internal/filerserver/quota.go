package filerserver

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/kelpfs/kelp/internal/filer"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// quotaJSON is a directory quota as the HTTP API shows it.
type quotaJSON struct {
	Path      string `json:"path"`
	MaxBytes  int64  `json:"maxBytes"`
	MaxFiles  int64  `json:"maxFiles"`
	UsedBytes int64  `json:"usedBytes"`
	UsedFiles int64  `json:"usedFiles"`
}

func toQuotaJSON(q *filer.Quota) quotaJSON {
	return quotaJSON{Path: q.Path, MaxBytes: q.MaxBytes, MaxFiles: q.MaxFiles, UsedBytes: q.UsedBytes, UsedFiles: q.UsedFiles}
}

// quota answers ?op=quota: GET shows the directory's quota (404 when it has
// none; ?list=true lists every quota at or below it), PUT/POST sets it from
// ?bytes=N&files=N (0 or absent: unlimited), or drops it with ?remove=true.
func (s *Server) quota(w http.ResponseWriter, r *http.Request, p string) {
	ctx := r.Context()
	q := r.URL.Query()
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		if q.Get("list") == "true" {
			qs, err := s.filer.ListQuotas(ctx, p)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			out := []quotaJSON{}
			for _, x := range qs {
				out = append(out, toQuotaJSON(x))
			}
			writeJSON(w, http.StatusOK, map[string]any{"quotas": out})
			return
		}
		x, err := s.filer.GetQuota(ctx, p)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, toQuotaJSON(x))
		return
	}
	if q.Get("remove") == "true" {
		if err := s.filer.RemoveQuota(ctx, p); err != nil {
			s.writeError(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	limit := func(name string) (int64, error) {
		v := q.Get(name)
		if v == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%w: %s=%q is not a count >= 0", errBadRequest, name, v)
		}
		return n, nil
	}
	b, err := limit("bytes")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	n, err := limit("files")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	x, err := s.filer.SetQuota(ctx, p, b, n)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toQuotaJSON(x))
}

// Quota is the gRPC form of ?op=quota.
func (g *grpcServer) Quota(ctx context.Context, req *filerpb.QuotaRequest) (*filerpb.QuotaResponse, error) {
	var q *filer.Quota
	var err error
	switch req.GetOp() {
	case filerpb.QuotaRequest_GET:
		q, err = g.s.filer.GetQuota(ctx, req.GetPath())
	case filerpb.QuotaRequest_SET:
		q, err = g.s.filer.SetQuota(ctx, req.GetPath(), req.GetMaxBytes(), req.GetMaxFiles())
	case filerpb.QuotaRequest_REMOVE:
		err = g.s.filer.RemoveQuota(ctx, req.GetPath())
		q = &filer.Quota{Path: req.GetPath()}
	default:
		err = fmt.Errorf("%w: unknown quota op %v", errBadRequest, req.GetOp())
	}
	if err != nil {
		return nil, g.err("Quota", err)
	}
	return &filerpb.QuotaResponse{Path: q.Path, MaxBytes: q.MaxBytes, MaxFiles: q.MaxFiles, UsedBytes: q.UsedBytes, UsedFiles: q.UsedFiles}, nil
}

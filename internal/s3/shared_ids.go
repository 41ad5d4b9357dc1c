package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/filer"
)

// SharedIdentitiesPath is where the admin UI keeps the access keys it
// creates: an identity file (IdentityFile's JSON) in the filer, under its
// system directory /.kelp (hidden from S3, whose buckets are elsewhere).
// A gateway with Config.SharedIdentities set to it re-reads it when it
// changes, so that a key created or revoked there works, or stops
// working, on every gateway over that filer without a restart.
const SharedIdentitiesPath = "/.kelp/s3/identities.json"

// maxSharedIdentities bounds the shared file (some thousands of keys).
const maxSharedIdentities = 4 << 20

// sharedStamp identifies a version of the shared identity file: "" when
// there is none.
func sharedStamp(e *filer.Entry) string {
	if e == nil {
		return ""
	}
	return fmt.Sprint(e.Mtime.UnixNano(), e.Size, e.ETag())
}

// loadShared reads the shared identity file from the filer: none (and no
// error) when it does not exist.
func (s *Server) loadShared(ctx context.Context) ([]Identity, string, error) {
	p := s.cfg.SharedIdentities
	e, err := s.cfg.Namespace.FindEntry(ctx, p)
	if errors.Is(err, filer.ErrNotFound) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	if e.IsDir() || e.Size > maxSharedIdentities {
		return nil, "", fmt.Errorf("s3: shared identity file %s: not a file of at most %d bytes", p, maxSharedIdentities)
	}
	blobs := s.cfg.Namespace.Blobs()
	cs, err := chunk.Resolve(ctx, blobs, e.Chunks, 0, -1)
	if err != nil {
		return nil, "", fmt.Errorf("s3: shared identity file %s: %w", p, err)
	}
	b, err := io.ReadAll(io.LimitReader(chunk.NewReader(ctx, blobs, cs, e.Size), maxSharedIdentities))
	if err != nil {
		return nil, "", fmt.Errorf("s3: shared identity file %s: %w", p, err)
	}
	var f IdentityFile
	if len(bytes.TrimSpace(b)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			return nil, "", fmt.Errorf("s3: shared identity file %s: %w", p, err)
		}
	}
	return f.Identities, sharedStamp(e), nil
}

// watchShared reloads the identities when the shared file changes (its
// mtime, size or ETag), until ctx ends. A file that does not load keeps
// the previous identities (and is logged, never with a key).
func (s *Server) watchShared(ctx context.Context) {
	t := time.NewTicker(s.cfg.ReloadInterval)
	defer t.Stop()
	last := s.sharedAt.Load()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e, err := s.cfg.Namespace.FindEntry(ctx, s.cfg.SharedIdentities)
		if errors.Is(err, filer.ErrNotFound) {
			e, err = nil, nil
		}
		if err != nil {
			continue // the filer is away: keep what we have
		}
		if now := sharedStamp(e); last != nil && *last == now {
			continue
		}
		if err := s.reload(); err != nil {
			s.log.Error("s3: identities not reloaded; keeping the previous ones", "file", s.cfg.SharedIdentities, "err", err)
			now := sharedStamp(e)
			last = &now // do not retry a bad version every tick
			continue
		}
		last = s.sharedAt.Load()
		s.log.Info("s3: identities reloaded", "file", s.cfg.SharedIdentities)
	}
}

package volumeserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/kelpfs/kelp/internal/erasure"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/volume"
)

// ecShardTimeout bounds one remote shard range read; a silent holder is
// then treated as a lost shard and the range reconstructed from others.
const ecShardTimeout = 5 * time.Second

// handleECRead serves a needle of an erasure-coded volume: found in the EC
// index, read from its data shard (here, or one range read from the holder),
// reconstructed from k other shards when that fails.
func (s *Server) handleECRead(w http.ResponseWriter, r *http.Request, id fid.FileID, ev *erasure.Volume) {
	rec, bad, err := ev.Read(r.Context(), id.Key, id.Cookie, s.ecFetch(ev, nil), ev.Shards().List(), time.Now())
	if bad != 0 {
		s.log.Warn("EC shards failed a read; the needle was reconstructed from others",
			"volume", id.Volume, "shards", bad.String(), "needle", id.String(), "err", err)
	}
	if err != nil {
		s.writeDomainError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("ETag", fmt.Sprintf(`"%08x"`, rec.DataCRC))
	h.Set("Accept-Ranges", "bytes")
	ctype := rec.Meta.Mime
	if ctype == "" {
		ctype = mime.TypeByExtension(filepath.Ext(rec.Meta.Name))
	}
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	h.Set("Content-Type", ctype)
	if rec.Meta.Name != "" {
		disposition := "inline"
		if dl, _ := strconv.ParseBool(r.URL.Query().Get("dl")); dl {
			disposition = "attachment"
		}
		h.Set("Content-Disposition", mime.FormatMediaType(disposition, map[string]string{"filename": rec.Meta.Name}))
	}
	mod := time.Unix(0, rec.Meta.AppendedAtNs)
	if rec.Meta.LastModified != 0 {
		mod = time.Unix(rec.Meta.LastModified, 0)
	}
	if isPlainRead(r) {
		h.Set("Last-Modified", mod.UTC().Format(http.TimeFormat))
		h.Set("Content-Length", strconv.Itoa(len(rec.Data)))
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			w.Write(rec.Data)
		}
		return
	}
	http.ServeContent(w, r, "", mod, bytes.NewReader(rec.Data))
}

// ecHolders maps each shard of an EC volume to a server holding it.
type ecHolders map[int]string

// ecFetch reads shard ranges: from this server's shards, else from a holder
// (the explicit holders, or those the master reports).
func (s *Server) ecFetch(ev *erasure.Volume, holders ecHolders) erasure.Fetch {
	var once sync.Once
	var known ecHolders
	var knownErr error
	return func(ctx context.Context, shard int, off, n int64, verify bool) ([]byte, error) {
		if ev != nil && ev.Shards().Has(shard) {
			b, err := ev.ReadLocal(shard, off, n, verify)
			if err == nil || !errors.Is(err, erasure.ErrShardUnavailable) {
				return b, err
			}
		}
		once.Do(func() {
			known = holders
			if known == nil {
				known, knownErr = s.lookupHolders(ctx, ev.ID)
			}
		})
		if knownErr != nil {
			return nil, fmt.Errorf("%w: %v", erasure.ErrShardUnavailable, knownErr)
		}
		url, ok := known[shard]
		if !ok || url == s.URL() {
			return nil, fmt.Errorf("%w: no server holds shard %d", erasure.ErrShardUnavailable, shard)
		}
		if until, bad := s.ecSuspects.Load(url); bad && time.Now().Before(until.(time.Time)) {
			return nil, fmt.Errorf("%w: shard %d: holder %s failed recently", erasure.ErrShardUnavailable, shard, url)
		}
		b, err := s.fetchRemoteShard(ctx, url, ev, shard, off, n, verify)
		var moved *errShardMoved
		switch {
		case errors.As(err, &moved):
			if holders == nil {
				s.client.Invalidate(ev.ID) // the master's word is stale
			}
		case errors.Is(err, erasure.ErrShardUnavailable) && ctx.Err() == nil:
			// A dead holder would cost every degraded read a connection
			// attempt per shard; skip it for a while.
			s.ecSuspects.Store(url, time.Now().Add(ecSuspectFor))
		}
		return b, err
	}
}

// ecSuspectFor is how long a shard holder that failed a read is skipped.
const ecSuspectFor = 3 * time.Second

// errShardMoved: the holder answered that it does not hold the shard.
type errShardMoved struct{ msg string }

func (e *errShardMoved) Error() string { return e.msg }
func (e *errShardMoved) Unwrap() error { return erasure.ErrShardUnavailable }

func (s *Server) lookupHolders(ctx context.Context, vid uint32) (ecHolders, error) {
	if s.client == nil {
		return nil, errors.New("no master configured")
	}
	locs, err := s.client.Lookup(ctx, vid)
	if err != nil {
		return nil, err
	}
	h := ecHolders{}
	for _, l := range locs {
		for _, i := range erasure.ShardSet(l.EcShards).List() {
			if _, dup := h[i]; !dup || l.URL == s.URL() {
				h[i] = l.URL
			}
		}
	}
	return h, nil
}

func (s *Server) fetchRemoteShard(ctx context.Context, url string, ev *erasure.Volume, shard int, off, n int64, verify bool) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, ecShardTimeout)
	defer cancel()
	q := fmt.Sprintf("http://%s/ec/shard?volume=%d&shard=%d&offset=%d&size=%d", url, ev.ID, shard, off, n)
	if verify {
		q += "&verify=1"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, q, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: shard %d on %s: %v", erasure.ErrShardUnavailable, shard, url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		text := fmt.Sprintf("shard %d on %s: %s %s", shard, url, resp.Status, bytes.TrimSpace(msg))
		switch resp.StatusCode {
		case http.StatusUnprocessableEntity:
			return nil, fmt.Errorf("%w: %s", erasure.ErrCorrupt, text)
		case http.StatusNotFound:
			return nil, &errShardMoved{"erasure: shard unavailable: " + text}
		}
		return nil, fmt.Errorf("%w: %s", erasure.ErrShardUnavailable, text)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(resp.Body, b); err != nil {
		return nil, fmt.Errorf("%w: shard %d on %s: %v", erasure.ErrShardUnavailable, shard, url, err)
	}
	return b, nil
}

// handleRoutes serves GET /ec/routes?volume=V: the EC volume's route table
// (erasure.AppendRoutes format), for clients that send each read straight
// to the holder of the needle's data shard.
func (s *Server) handleRoutes(w http.ResponseWriter, r *http.Request) {
	vid, err := strconv.ParseUint(r.URL.Query().Get("volume"), 10, 32)
	if err != nil {
		writeError(w, http.StatusBadRequest, "want volume")
		return
	}
	ev, ok := s.store.EcVolume(uint32(vid))
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("EC volume %d not on %s", vid, s.URL()))
		return
	}
	b := ev.EncodedRoutes()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Write(b)
}

// handleShardRead serves GET /ec/shard?volume=V&shard=S&offset=O&size=N[&verify=1]:
// raw bytes of a shard held here. 404: not held; 422: a block failed its
// checksum (the shard is corrupt there).
func (s *Server) handleShardRead(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	vid, err1 := strconv.ParseUint(q.Get("volume"), 10, 32)
	shard, err2 := strconv.Atoi(q.Get("shard"))
	off, err3 := strconv.ParseInt(q.Get("offset"), 10, 64)
	n, err4 := strconv.ParseInt(q.Get("size"), 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil || n < 0 || n > 64<<20 {
		writeError(w, http.StatusBadRequest, "want volume, shard, offset and size (at most 64 MiB)")
		return
	}
	ev, ok := s.store.EcVolume(uint32(vid))
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("EC volume %d not on %s", vid, s.URL()))
		return
	}
	b, err := ev.ReadLocal(shard, off, n, q.Get("verify") == "1")
	switch {
	case errors.Is(err, erasure.ErrShardUnavailable):
		writeError(w, http.StatusNotFound, err.Error())
		return
	case errors.Is(err, erasure.ErrCorrupt):
		s.log.Error("EC shard block failed its checksum", "volume", vid, "shard", shard, "offset", off, "err", err)
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Write(b)
}

// handleECDelete records a delete in the journal of every holder of the
// volume: here, and (unless this request was forwarded) on each other holder
// the master knows. The answer waits for all of them.
func (s *Server) handleECDelete(w http.ResponseWriter, r *http.Request, id fid.FileID, ev *erasure.Volume) {
	e, err := ev.Locate(id.Key)
	if err != nil {
		s.writeDomainError(w, r, err)
		return
	}
	if !isReplicaRequest(r) {
		// The cookie is in the record's first bytes: one small range read.
		head, _, err := erasure.ReadRange(r.Context(), ev.Layout(), s.ecFetch(ev, nil), e.Offset, needle.HeaderSize, 0, ev.Shards().List())
		if err != nil {
			s.writeDomainError(w, r, err)
			return
		}
		if h, err := needle.ParseHeader(head); err != nil || h.Key != id.Key {
			s.writeDomainError(w, r, fmt.Errorf("ec volume %d: needle %x: %w", id.Volume, id.Key, needle.ErrCorrupt))
			return
		} else if h.Cookie != id.Cookie {
			s.writeDomainError(w, r, fmt.Errorf("ec volume %d: delete %x: %w", id.Volume, id.Key, volume.ErrCookieMismatch))
			return
		}
		if err := s.forwardECDelete(r.Context(), id); err != nil {
			s.writeDomainError(w, r, err)
			return
		}
	}
	if err := ev.Delete(id.Key); err != nil {
		s.writeDomainError(w, r, err)
		return
	}
	s.notifyChange()
	writeJSON(w, http.StatusAccepted, map[string]int64{"size": int64(e.Size)})
}

// forwardECDelete sends a delete to every other holder of the volume the
// master knows. A holder that fails may be one the master has dropped
// since the locations were cached: the locations are then asked for again
// once, and only the holders still listed must succeed.
func (s *Server) forwardECDelete(ctx context.Context, id fid.FileID) error {
	done := map[string]bool{}
	var lastErr error
	for attempt := 0; attempt < 2; attempt++ {
		locs, err := s.client.Lookup(ctx, id.Volume)
		if err != nil {
			return err
		}
		var wg sync.WaitGroup
		errs := make([]error, len(locs))
		for i, l := range locs {
			if l.URL == s.URL() || l.EcShards == 0 || done[l.URL] {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := s.forwardDelete(ctx, l.URL, id); err != nil {
					errs[i] = &errReplica{url: l.URL, err: err}
				}
			}()
		}
		wg.Wait()
		for i, l := range locs {
			if errs[i] == nil {
				done[l.URL] = true
			}
		}
		if lastErr = errors.Join(errs...); lastErr == nil {
			return nil
		}
		s.client.Invalidate(id.Volume)
	}
	return lastErr
}

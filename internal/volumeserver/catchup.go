package volumeserver

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/security"
	"github.com/kelpfs/kelp/internal/volume"
)

// Catch-up: a copy of a volume that missed writes (its server was down or
// cut off while the volume took writes under the degraded write policy) is
// brought level with a good copy by copying only what differs, never the
// whole volume. The master asks the copy that is behind (POST /sync/pull);
// that server reads the good copy's needle index (GET /sync/index), compares
// it with its own, fetches each needle it lacks or holds in another size
// (GET /sync/needle) and applies each delete it missed. A key deleted on
// either side stays deleted: a tombstone is never undone by a catch-up.
// Writes that reach the copy while it catches up are ordinary writes; the
// master counts the copy as caught up only after a pass that found nothing
// left to copy.

// indexRecord is the wire size of one entry of GET /sync/index: key (8),
// body size (4), deleted (1), big-endian.
const indexRecord = 13

// needleMetaHeader carries a copied needle's metadata (JSON, base64).
const needleMetaHeader = "X-Kelp-Needle-Meta"

// CatchUpResult is the answer of POST /sync/pull.
type CatchUpResult struct {
	Volume  uint32 `json:"volume"`
	From    string `json:"from"`
	Keys    int    `json:"keys"`    // index entries compared
	Copied  int    `json:"copied"`  // needles copied
	Deleted int    `json:"deleted"` // deletes applied
	Bytes   int64  `json:"bytes"`   // data bytes copied
}

func (s *Server) syncVolume(w http.ResponseWriter, r *http.Request) (*volume.Volume, uint32, bool) {
	vid, err := strconv.ParseUint(r.URL.Query().Get("volume"), 10, 32)
	if err != nil || vid == 0 {
		writeError(w, http.StatusBadRequest, "want volume=<id>")
		return nil, 0, false
	}
	v, ok := s.store.Volume(uint32(vid))
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("volume %d not on %s", vid, s.URL()))
		return nil, 0, false
	}
	return v, uint32(vid), true
}

// handleSyncIndex streams the volume's needle index.
func (s *Server) handleSyncIndex(w http.ResponseWriter, r *http.Request) {
	v, _, ok := s.syncVolume(w, r)
	if !ok {
		return
	}
	idx, err := v.Index()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(idx)*indexRecord))
	bw := bufio.NewWriterSize(w, 64<<10)
	var rec [indexRecord]byte
	for _, e := range idx {
		binary.BigEndian.PutUint64(rec[0:8], e.Key)
		binary.BigEndian.PutUint32(rec[8:12], e.Size)
		rec[12] = 0
		if e.Deleted {
			rec[12] = 1
		}
		if _, err := bw.Write(rec[:]); err != nil {
			return
		}
	}
	bw.Flush()
}

// handleSyncNeedle sends one needle's data, its metadata in a header.
func (s *Server) handleSyncNeedle(w http.ResponseWriter, r *http.Request) {
	v, _, ok := s.syncVolume(w, r)
	if !ok {
		return
	}
	key, err := strconv.ParseUint(r.URL.Query().Get("key"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, "want key=<needle key>")
		return
	}
	o, err := v.ReadAny(key)
	switch {
	case errors.Is(err, volume.ErrNotFound), errors.Is(err, volume.ErrDeleted):
		writeError(w, http.StatusNotFound, err.Error())
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	defer o.Close()
	meta, err := json.Marshal(o.Meta)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set(needleMetaHeader, base64.StdEncoding.EncodeToString(meta))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(o.Size, 10))
	io.Copy(w, o)
}

// handleSyncPull catches this server's copy of a volume up with the copy at
// from (host:port).
func (s *Server) handleSyncPull(w http.ResponseWriter, r *http.Request) {
	v, vid, ok := s.syncVolume(w, r)
	if !ok {
		return
	}
	from := r.URL.Query().Get("from")
	if from == "" || from == s.URL() {
		writeError(w, http.StatusBadRequest, "want from=<host:port of another copy>")
		return
	}
	res, err := s.catchUp(r.Context(), v, vid, from)
	if err != nil {
		s.log.Warn("catch-up failed", "volume", vid, "from", from, "copied", res.Copied, "deleted", res.Deleted, "err", err)
		writeError(w, http.StatusBadGateway, err.Error())
		return
	}
	if res.Copied+res.Deleted > 0 {
		s.log.Info("volume caught up", "volume", vid, "from", from, "keys", res.Keys, "copied", res.Copied, "deleted", res.Deleted, "bytes", res.Bytes)
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) catchUp(ctx context.Context, v *volume.Volume, vid uint32, from string) (CatchUpResult, error) {
	res := CatchUpResult{Volume: vid, From: from}
	theirs, err := s.fetchIndex(ctx, vid, from)
	if err != nil {
		return res, err
	}
	mine, err := v.Index()
	if err != nil {
		return res, err
	}
	have := make(map[uint64]volume.IndexEntry, len(mine))
	for _, e := range mine {
		have[e.Key] = e
	}
	res.Keys = len(theirs)
	for _, e := range theirs {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		m, ok := have[e.Key]
		switch {
		case e.Deleted:
			if !ok || m.Deleted {
				continue
			}
			o, err := v.ReadAny(e.Key)
			if err != nil {
				return res, fmt.Errorf("volume %d needle %x: %w", vid, e.Key, err)
			}
			cookie := o.Meta.Cookie
			o.Close()
			if _, err := v.Delete(ctx, e.Key, cookie); err != nil && !errors.Is(err, volume.ErrDeleted) {
				return res, fmt.Errorf("volume %d delete %x: %w", vid, e.Key, err)
			}
			res.Deleted++
		case ok && (m.Deleted || m.Size == e.Size):
			// Same needle, or deleted here: a tombstone is never undone.
		default:
			n, err := s.copyNeedle(ctx, v, vid, from, e.Key)
			if errors.Is(err, errGone) {
				continue // deleted there since the index was read: the next pass sees it
			}
			if err != nil {
				return res, err
			}
			res.Copied++
			res.Bytes += n
		}
	}
	return res, nil
}

var errGone = errors.New("needle gone at the source")

func (s *Server) fetchIndex(ctx context.Context, vid uint32, from string) ([]volume.IndexEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	u := security.URL(from) + "/sync/index?" + url.Values{"volume": {strconv.FormatUint(uint64(vid), 10)}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("index of volume %d on %s: %w", vid, from, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("index of volume %d on %s: %s: %s", vid, from, resp.Status, msg)
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var out []volume.IndexEntry
	var rec [indexRecord]byte
	for {
		if _, err := io.ReadFull(br, rec[:]); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("index of volume %d on %s: %w", vid, from, err)
		}
		out = append(out, volume.IndexEntry{
			Key: binary.BigEndian.Uint64(rec[0:8]), Size: binary.BigEndian.Uint32(rec[8:12]), Deleted: rec[12] == 1,
		})
	}
}

// copyNeedle fetches one needle from the copy at from and writes it here.
func (s *Server) copyNeedle(ctx context.Context, v *volume.Volume, vid uint32, from string, key uint64) (int64, error) {
	u := security.URL(from) + "/sync/needle?" + url.Values{
		"volume": {strconv.FormatUint(uint64(vid), 10)}, "key": {strconv.FormatUint(key, 10)},
	}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("volume %d needle %x from %s: %w", vid, key, from, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return 0, errGone
	}
	if resp.StatusCode != http.StatusOK || resp.ContentLength < 0 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return 0, fmt.Errorf("volume %d needle %x from %s: %s: %s", vid, key, from, resp.Status, msg)
	}
	raw, err := base64.StdEncoding.DecodeString(resp.Header.Get(needleMetaHeader))
	var m needle.Meta
	if err == nil {
		err = json.Unmarshal(raw, &m)
	}
	if err != nil || m.Key != key {
		return 0, fmt.Errorf("volume %d needle %x from %s: bad metadata header", vid, key, from)
	}
	if _, err := v.Write(ctx, m, resp.Body, resp.ContentLength); err != nil {
		return 0, fmt.Errorf("volume %d needle %x: %w", vid, key, err)
	}
	return resp.ContentLength, nil
}

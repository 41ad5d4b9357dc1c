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
	"strings"
	"sync"
	"time"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/erasure"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/security"
	"github.com/kelpfs/kelp/internal/volume"
)

// ecShardTimeout bounds one remote shard range read; a silent holder is
// then treated as a lost shard and the range reconstructed from others.
const ecShardTimeout = 5 * time.Second

// handleECRead serves a needle of an erasure-coded volume: found in the EC
// index, read from its data shard (here, or one range read from the holder),
// reconstructed from k other shards when that fails.
func (s *Server) handleECRead(w http.ResponseWriter, r *http.Request, id fid.FileID, ev *erasure.Volume) {
	if !s.ecReady(r.Context(), id.Volume) {
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("EC volume %d on %s is catching up on deletes made while it was away", id.Volume, s.URL()))
		return
	}
	// A large needle is streamed (erasure.Object): bounded memory per read,
	// and a range read fetches only the blocks it needs.
	obj, err := ev.Open(r.Context(), id.Key, id.Cookie, s.ecFetch(ev, nil), nil, time.Now())
	logBad := func(err error) {
		if obj != nil && obj.Bad != 0 {
			s.log.Warn("EC shards failed a read; the needle was reconstructed from others",
				"volume", id.Volume, "shards", obj.Bad.String(), "needle", id.String(), "err", err)
		}
	}
	if err != nil {
		logBad(err)
		s.writeDomainError(w, r, err)
		return
	}
	h := w.Header()
	h.Set(client.HeaderEC, "1") // a client with stale locations looks the volume up again
	h.Set("ETag", fmt.Sprintf(`"%08x"`, obj.DataCRC))
	h.Set("Accept-Ranges", "bytes")
	ctype := obj.Meta.Mime
	if ctype == "" {
		ctype = mime.TypeByExtension(filepath.Ext(obj.Meta.Name))
	}
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	h.Set("Content-Type", ctype)
	if obj.Meta.Name != "" {
		disposition := "inline"
		if dl, _ := strconv.ParseBool(r.URL.Query().Get("dl")); dl {
			disposition = "attachment"
		}
		h.Set("Content-Disposition", mime.FormatMediaType(disposition, map[string]string{"filename": obj.Meta.Name}))
	}
	mod := time.Unix(0, obj.Meta.AppendedAtNs)
	if obj.Meta.LastModified != 0 {
		mod = time.Unix(obj.Meta.LastModified, 0)
	}
	if isPlainRead(r) {
		h.Set("Last-Modified", mod.UTC().Format(http.TimeFormat))
		h.Set("Content-Length", strconv.FormatInt(obj.Size, 10))
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			if data := obj.Bytes(); data != nil {
				w.Write(data)
			} else if _, err := io.Copy(w, obj); err != nil {
				// Too late for an error status: the client sees a short body.
				s.log.Error("EC read failed mid-stream", "needle", id.String(), "err", err)
			}
		}
		logBad(nil)
		return
	}
	http.ServeContent(w, r, "", mod, obj)
	logBad(nil)
}

// ecHolders maps each shard of an EC volume to a server holding it.
type ecHolders map[int]string

// ecSource reads shard ranges of one EC volume for the erasure package:
// from this server's shards, else from a holder (the explicit holders, or
// those the master reports). It batches verified reads of several shards
// into one request per holder (erasure.BatchFetcher).
type ecSource struct {
	s       *Server
	ev      *erasure.Volume // nil until this server has a part of the volume
	vid     uint32
	holders ecHolders // explicit holders; nil: ask the master
	// current, when set, returns this server's part of the volume at each
	// read (a rebuild opens it while it runs); else ev.
	current func() *erasure.Volume

	once     sync.Once
	known    ecHolders
	knownErr error
}

func (s *Server) ecFetch(ev *erasure.Volume, holders ecHolders) *ecSource {
	return &ecSource{s: s, ev: ev, vid: ev.ID, holders: holders}
}

func (e *ecSource) holderMap(ctx context.Context) (ecHolders, error) {
	e.once.Do(func() {
		e.known = e.holders
		if e.known == nil {
			e.known, e.knownErr = e.s.lookupHolders(ctx, e.vid)
		}
	})
	return e.known, e.knownErr
}

func (e *ecSource) vol() *erasure.Volume {
	if e.current != nil {
		return e.current()
	}
	return e.ev
}

func (e *ecSource) local(shard int) bool {
	v := e.vol()
	return v != nil && v.HasShard(shard)
}

// remote returns the holder to ask for shard, or why there is none.
func (e *ecSource) remote(ctx context.Context, shard int) (string, error) {
	known, err := e.holderMap(ctx)
	if err != nil {
		return "", fmt.Errorf("%w: %v", erasure.ErrShardUnavailable, err)
	}
	url, ok := known[shard]
	if !ok || url == e.s.URL() {
		return "", fmt.Errorf("%w: no server holds shard %d", erasure.ErrShardUnavailable, shard)
	}
	if until, bad := e.s.ecSuspects.Load(url); bad && time.Now().Before(until.(time.Time)) {
		return "", fmt.Errorf("%w: shard %d: holder %s failed recently", erasure.ErrShardUnavailable, shard, url)
	}
	return url, nil
}

// noteFailure reacts to a failed remote read.
func (e *ecSource) noteFailure(ctx context.Context, url string, err error) {
	var moved *errShardMoved
	switch {
	case errors.As(err, &moved):
		if e.holders == nil {
			e.s.client.Invalidate(e.vid) // the master's word is stale
		}
	case errors.Is(err, erasure.ErrShardUnavailable) && ctx.Err() == nil:
		// A dead holder would cost every degraded read a connection
		// attempt per shard; skip it for a while.
		e.s.ecSuspects.Store(url, time.Now().Add(ecSuspectFor))
	}
}

// PreferShards implements erasure.ShardPreferrer: for a reconstruction,
// this server's own shards first, then those on holders that have not
// failed lately.
func (e *ecSource) PreferShards(ctx context.Context) []int {
	var out []int
	if v := e.vol(); v != nil {
		out = v.Shards().List()
	}
	known, _ := e.holderMap(ctx)
	for i := range erasure.MaxShards {
		if e.local(i) {
			continue
		}
		if _, err := e.remote(ctx, i); err == nil && known[i] != "" {
			out = append(out, i)
		}
	}
	return out
}

// UnavailableShards implements erasure.UnavailableReporter: the shards
// neither here nor on a holder that has not failed lately.
func (e *ecSource) UnavailableShards(ctx context.Context) erasure.ShardSet {
	var out erasure.ShardSet
	for i := range erasure.MaxShards {
		if e.local(i) {
			continue
		}
		if _, err := e.remote(ctx, i); err != nil {
			out = out.With(i)
		}
	}
	return out
}

// Reconstructed implements erasure.ReconstructionSink: rebuilt blocks are
// cached for the next reads of the same blocks.
func (e *ecSource) Reconstructed(shard int, off int64, b []byte) {
	e.s.ecCache.put(e.vid, shard, off, b)
}

// Fetch implements erasure.Fetcher.
func (e *ecSource) Fetch(ctx context.Context, shard int, off, n int64, verify bool) ([]byte, error) {
	if !verify && !e.local(shard) {
		// A block rebuilt before (its shard is lost here and there) was
		// verified when it was rebuilt.
		if b, ok := e.s.ecCache.get(e.vid, shard, off, n); ok {
			return b, nil
		}
	}
	if e.local(shard) {
		b, err := e.vol().ReadLocal(shard, off, n, verify)
		if err == nil || !errors.Is(err, erasure.ErrShardUnavailable) {
			return b, err
		}
	}
	url, err := e.remote(ctx, shard)
	if err != nil {
		return nil, err
	}
	q := fmt.Sprintf("%s/ec/shard?volume=%d&shard=%d&offset=%d&size=%d", security.URL(url), e.vid, shard, off, n)
	if verify {
		q += "&verify=1"
	}
	b, err := e.s.getShardBytes(ctx, url, q, n)
	if err != nil {
		e.noteFailure(ctx, url, err)
		return nil, fmt.Errorf("shard %d: %w", shard, err)
	}
	return b, nil
}

// FetchVerified implements erasure.BatchFetcher: local shards are read
// here, the others with one request per holder, all at once.
func (e *ecSource) FetchVerified(ctx context.Context, shards []int, off, n int64) ([][]byte, []error) {
	got := make([][]byte, len(shards))
	for i := range got {
		got[i] = make([]byte, n)
	}
	return got, e.FetchVerifiedInto(ctx, shards, off, got)
}

// FetchVerifiedInto implements erasure.IntoFetcher: FetchVerified into the
// caller's buffers (dst[i] for shards[i], all of the range's length), the
// answers of other holders streamed straight into them.
func (e *ecSource) FetchVerifiedInto(ctx context.Context, shards []int, off int64, dst [][]byte) []error {
	errs := make([]error, len(shards))
	if len(shards) == 0 {
		return errs
	}
	n := int64(len(dst[0]))
	byURL := map[string][]int{} // holder -> indexes into shards
	for i, sh := range shards {
		if e.local(sh) {
			errs[i] = e.vol().ReadLocalInto(sh, dst[i], off, true)
			if errs[i] == nil || !errors.Is(errs[i], erasure.ErrShardUnavailable) {
				continue
			}
		}
		url, err := e.remote(ctx, sh)
		if err != nil {
			errs[i] = err
			continue
		}
		errs[i] = nil
		byURL[url] = append(byURL[url], i)
	}
	var wg sync.WaitGroup
	for url, idx := range byURL {
		wg.Add(1)
		go func() {
			defer wg.Done()
			list := make([]string, len(idx))
			for j, i := range idx {
				list[j] = strconv.Itoa(shards[i])
			}
			q := fmt.Sprintf("%s/ec/shards?volume=%d&shards=%s&offset=%d&size=%d", security.URL(url), e.vid, strings.Join(list, ","), off, n)
			err := e.s.getShards(ctx, url, q, func(body io.Reader) error {
				// Per shard: a status byte (0 ok, 1 not here, 2 corrupt), then n bytes when ok.
				var st [1]byte
				for _, i := range idx {
					if _, err := io.ReadFull(body, st[:]); err != nil {
						return fmt.Errorf("%w: short answer from %s", erasure.ErrShardUnavailable, url)
					}
					switch st[0] {
					case 0:
						if _, err := io.ReadFull(body, dst[i]); err != nil {
							return fmt.Errorf("%w: short answer from %s", erasure.ErrShardUnavailable, url)
						}
					case 2:
						errs[i] = fmt.Errorf("%w: shard %d on %s", erasure.ErrCorrupt, shards[i], url)
					default:
						errs[i] = fmt.Errorf("%w: shard %d on %s", erasure.ErrShardUnavailable, shards[i], url)
					}
				}
				return nil
			})
			if err != nil {
				e.noteFailure(ctx, url, err)
				for _, i := range idx {
					if errs[i] == nil {
						errs[i] = err
					}
				}
			}
		}()
	}
	wg.Wait()
	return errs
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

// getShardBytes GETs a shard read of n bytes from another holder.
func (s *Server) getShardBytes(ctx context.Context, url, q string, n int64) ([]byte, error) {
	var b []byte
	err := s.getShards(ctx, url, q, func(body io.Reader) error {
		b = make([]byte, n)
		if _, err := io.ReadFull(body, b); err != nil {
			return fmt.Errorf("%w: %s: %v", erasure.ErrShardUnavailable, url, err)
		}
		return nil
	})
	return b, err
}

// getShards GETs a shard read from another holder and hands read its body.
func (s *Server) getShards(ctx context.Context, url, q string, read func(io.Reader) error) error {
	ctx, cancel := context.WithTimeout(ctx, ecShardTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, q, nil)
	if err != nil {
		return err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", erasure.ErrShardUnavailable, url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		text := fmt.Sprintf("%s: %s %s", url, resp.Status, bytes.TrimSpace(msg))
		switch resp.StatusCode {
		case http.StatusUnprocessableEntity:
			return fmt.Errorf("%w: %s", erasure.ErrCorrupt, text)
		case http.StatusNotFound:
			return &errShardMoved{"erasure: shard unavailable: " + text}
		}
		return fmt.Errorf("%w: %s", erasure.ErrShardUnavailable, text)
	}
	if err := read(resp.Body); err != nil {
		if errors.Is(err, erasure.ErrShardUnavailable) || errors.Is(err, erasure.ErrCorrupt) {
			return err
		}
		return fmt.Errorf("%w: %s: %v", erasure.ErrShardUnavailable, url, err)
	}
	return nil
}

// handleShardsRead serves GET /ec/shards?volume=V&shards=1,5,9&offset=O&size=N:
// the same verified range of several shards held here. For each shard in
// order: a status byte (0 ok, 1 not held here, 2 a block failed its
// checksum), then the N bytes when ok.
func (s *Server) handleShardsRead(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	vid, err1 := strconv.ParseUint(q.Get("volume"), 10, 32)
	off, err2 := strconv.ParseInt(q.Get("offset"), 10, 64)
	n, err3 := strconv.ParseInt(q.Get("size"), 10, 64)
	var shards []int
	var err4 error
	for _, f := range strings.Split(q.Get("shards"), ",") {
		i, err := strconv.Atoi(f)
		if err != nil || i < 0 || i >= erasure.MaxShards {
			err4 = fmt.Errorf("bad shard %q", f)
			break
		}
		shards = append(shards, i)
	}
	if err := errors.Join(err1, err2, err3, err4); err != nil || n < 0 || n > 16<<20 || len(shards) == 0 {
		writeError(w, http.StatusBadRequest, "want volume, shards (a,b,...), offset and size (at most 16 MiB)")
		return
	}
	ev, ok := s.store.EcVolume(uint32(vid))
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("EC volume %d not on %s", vid, s.URL()))
		return
	}
	if off < 0 || off%erasure.BlockSize != 0 || n%erasure.BlockSize != 0 || off+n > ev.Layout().ShardSize {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("offset and size must be whole %d-byte blocks inside the %d-byte shards", erasure.BlockSize, ev.Layout().ShardSize))
		return
	}
	out := make([]byte, 0, len(shards)*(int(n)+1))
	for _, sh := range shards {
		b, err := ev.ReadLocal(sh, off, n, true)
		switch {
		case err == nil:
			out = append(out, 0)
			out = append(out, b...)
		case errors.Is(err, erasure.ErrCorrupt):
			s.log.Error("EC shard block failed its checksum", "volume", vid, "shard", sh, "offset", off, "err", err)
			out = append(out, 2)
		default:
			out = append(out, 1)
		}
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.Write(out)
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
	case errors.Is(err, erasure.ErrRange):
		writeError(w, http.StatusBadRequest, err.Error())
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
		if err := s.forwardECDelete(r.Context(), id, ev); err != nil {
			s.writeDomainError(w, r, err)
			return
		}
	}
	if err := ev.Delete(id.Key); err != nil {
		if errors.Is(err, erasure.ErrSealed) {
			// ec.decode switched this server to the decoded volume since
			// the request took the EC volume: the delete goes there.
			if _, ok := s.store.Volume(id.Volume); ok {
				s.handleDelete(w, r, id)
				return
			}
		}
		s.writeDomainError(w, r, err)
		return
	}
	s.notifyChange()
	writeJSON(w, http.StatusAccepted, map[string]int64{"size": int64(e.Size)})
}

// forwardECDelete sends a delete to every other holder of the volume the
// master knows. The delete stands once every holder that answers has
// journaled it and those holders (this one included) hold at least k
// distinct shards: a holder that cannot be reached (down, not yet dropped by
// the master) is skipped, and catches up from the others' journals before it
// serves reads again (ecjournal.go). A holder that answers with an error
// fails the delete. A holder that fails may also be one the master has
// dropped since the locations were cached: the locations are then asked for
// again once.
func (s *Server) forwardECDelete(ctx context.Context, id fid.FileID, ev *erasure.Volume) error {
	done := map[string]erasure.ShardSet{}
	var lastErr error
	var down []string
	for attempt := 0; attempt < 2; attempt++ {
		locs, err := s.client.Lookup(ctx, id.Volume)
		if err != nil {
			return err
		}
		var wg sync.WaitGroup
		errs := make([]error, len(locs))
		for i, l := range locs {
			if l.URL == s.URL() || l.EcShards == 0 || done[l.URL] != 0 {
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
		down = down[:0]
		answered := true
		for i, l := range locs {
			switch re, _ := errs[i].(*errReplica); {
			case errs[i] == nil && l.EcShards != 0 && l.URL != s.URL():
				done[l.URL] = erasure.ShardSet(l.EcShards)
			case re != nil && re.unreachable():
				down = append(down, l.URL)
			case errs[i] != nil:
				answered = false
			}
		}
		if lastErr = errors.Join(errs...); lastErr == nil {
			return nil
		}
		if !answered {
			break // a holder refused: no retry makes that a success
		}
		s.client.Invalidate(id.Volume)
	}
	if lastErr == nil {
		return nil
	}
	for _, err := range multiErrs(lastErr) {
		if re, ok := err.(*errReplica); !ok || !re.unreachable() {
			return lastErr
		}
	}
	have := ev.Shards()
	for _, sh := range done {
		have |= sh
	}
	k := ev.Layout().Scheme.Data
	if have.Count() < k {
		return fmt.Errorf("%w: the holders that journaled the delete hold only shards %s, fewer than %d: %w",
			erasure.ErrTooFewShards, have, k, lastErr)
	}
	s.log.Warn("EC delete journaled without unreachable holders; they catch up when they return",
		"volume", id.Volume, "needle", id.String(), "unreachable", down, "journaled shards", have.String())
	return nil
}

func multiErrs(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

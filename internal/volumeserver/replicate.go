package volumeserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/pb/masterpb"
	"github.com/kelpfs/kelp/internal/security"
	"github.com/kelpfs/kelp/internal/volume"
)

// Replicated writes: a client writes to any copy of a volume (the "primary" for
// that request); the primary writes locally and forwards the same bytes to every
// other copy in parallel, marked ?type=replicate so they do not forward again,
// and answers only when all copies have written. Consistency first: if any copy
// fails, the client gets an error (and retries with a new assignment) and the
// master is told to stop assigning the volume until it is repaired.

// ErrNotEnoughCopies is returned when the master knows fewer copies of a volume
// than its replication code asks for.
var ErrNotEnoughCopies = errors.New("volumeserver: volume has fewer copies than its replication asks for")

// ErrShortWriteUnrecorded: a write under the degraded policy reached enough
// copies but fewer than the replication asks for, and no master recorded
// which: it is not acknowledged (503), since the master could later take a
// copy that missed it for a good one. The copies that have it keep it; the
// client's retry writes it again.
var ErrShortWriteUnrecorded = errors.New("volumeserver: no master recorded a write short of copies")

// errReplica wraps a failed write to another copy.
type errReplica struct {
	url string
	err error
}

func (e *errReplica) Error() string { return fmt.Sprintf("replica %s: %v", e.url, e.err) }
func (e *errReplica) Unwrap() error { return e.err }

// errReplicaAnswer is a replica's non-success HTTP answer: it was reachable.
type errReplicaAnswer struct {
	status string
	msg    []byte
}

func (e *errReplicaAnswer) Error() string { return fmt.Sprintf("%s: %s", e.status, e.msg) }

// unreachable reports whether the replica's server could not be reached at
// all (as opposed to answering with an error).
func (e *errReplica) unreachable() bool {
	var answer *errReplicaAnswer
	return !errors.As(e.err, &answer)
}

// forwardTimeout bounds one forwarded request: a replica behind a cut network
// never answers, and a write must fail rather than hang. It allows 10 MB/s,
// slow for a data center link, plus a fixed margin.
func forwardTimeout(size int64) time.Duration {
	return 5*time.Second + time.Duration(size/(10<<20))*time.Second
}

// isReplicaRequest reports whether r was forwarded by another copy's primary.
func isReplicaRequest(r *http.Request) bool {
	return r.URL.RawQuery != "" && r.URL.Query().Get("type") == "replicate"
}

// replicaSet is where a write goes besides the local copy, and how many
// copies (the local one included) must have it before it is acknowledged:
// need 0 means every copy (the strict write policy).
type replicaSet struct {
	urls   []string
	need   int
	copies int // copies the volume's replication code asks for
}

// replicas returns the other copies of volume vid that a write must reach, or
// none when the volume has a single copy or the request is itself a replica
// write. The master's lookup answer carries the volume's write policy: under
// the degraded policy (minCopies N > 0) a write goes to the copies the master
// knows and is acknowledged once N of them have it; the master catches the
// others up later (docs/master.md, "Write policies"). Under that policy a
// copy the master marks unreachable (its probes fail, or its heartbeat
// stream broke: the server was probably killed) gets no forward: the write
// would only wait out a dial or an answer that does not come, and is
// recorded short of that copy all the same.
func (s *Server) replicas(ctx context.Context, r *http.Request, v *volume.Volume, vid uint32) (replicaSet, error) {
	copies := v.Stats().Replication.Copies()
	if copies <= 1 || isReplicaRequest(r) {
		return replicaSet{}, nil
	}
	locs, need, err := s.client.LookupWrite(ctx, vid)
	if err != nil {
		return replicaSet{}, fmt.Errorf("volumeserver: locating copies of volume %d: %w", vid, err)
	}
	others := otherCopies(locs, s.URL(), need > 0)
	if need > 0 && len(others)+1 < copies {
		// Short of copies under the degraded policy: ask afresh rather than
		// trust the cache, so that a copy that came back gets the write.
		s.client.Invalidate(vid)
		if locs, need, err = s.client.LookupWrite(ctx, vid); err != nil {
			return replicaSet{}, fmt.Errorf("volumeserver: locating copies of volume %d: %w", vid, err)
		}
		others = otherCopies(locs, s.URL(), need > 0)
	}
	enough := copies
	if need > 0 {
		enough = min(need, copies)
	}
	if len(others)+1 < enough {
		s.client.Invalidate(vid)
		return replicaSet{}, fmt.Errorf("%w: volume %d needs %d copies, the master knows %d",
			ErrNotEnoughCopies, vid, enough, len(others)+1)
	}
	return replicaSet{urls: others, need: need, copies: copies}, nil
}

// otherCopies are the URLs of locs but self, without the ones the master
// marks unreachable if skipUnreachable.
func otherCopies(locs []client.Location, self string, skipUnreachable bool) []string {
	var others []string
	for _, l := range locs {
		if l.URL != self && !(skipUnreachable && l.Unreachable) {
			others = append(others, l.URL)
		}
	}
	return others
}

// fanOut runs local and one forward per replica concurrently. Under the
// strict policy it returns the first error, local first; under the degraded
// one the local write must succeed and the write stands once rs.need copies
// have it. A failed replica is reported to the master either way.
func (s *Server) fanOut(ctx context.Context, vid uint32, rs replicaSet, local func() error,
	forward func(ctx context.Context, replica string) error) error {
	errs := make([]error, len(rs.urls))
	var wg sync.WaitGroup
	for i, rep := range rs.urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := forward(ctx, rep); err != nil {
				errs[i] = &errReplica{url: rep, err: err}
			}
		}()
	}
	localErr := local()
	wg.Wait()
	if localErr != nil {
		return localErr
	}
	written := []string{s.URL()}
	var first error
	for i, err := range errs {
		if err != nil {
			s.client.Invalidate(vid)
			go s.reportFailure(vid, err.(*errReplica))
			first = cmp.Or(first, err)
			continue
		}
		written = append(written, rs.urls[i])
	}
	if first != nil && (rs.need == 0 || len(written) < rs.need) {
		return first
	}
	if rs.need > 0 && len(written) < rs.copies {
		// Acknowledged short of copies only once the master has recorded
		// which copies have the write, so that it catches the others up.
		if err := s.reportDegradedWrite(vid, written); err != nil {
			return fmt.Errorf("%w: volume %d, written to %v: %v", ErrShortWriteUnrecorded, vid, written, err)
		}
	}
	return nil
}

// forwardWrite sends one spooled upload to a replica.
func (s *Server) forwardWrite(ctx context.Context, replica string, id fid.FileID, up *upload, body io.ReaderAt) error {
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout(up.size))
	defer cancel()
	q := url.Values{"type": {"replicate"}, "ts": {strconv.FormatInt(up.modTime.Unix(), 10)}}
	if up.name != "" {
		q.Set("name", up.name)
	}
	if volume.UnhurriedSync(ctx) {
		q.Set("sync", "unhurried")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut,
		security.URL(replica)+"/"+id.String()+"?"+q.Encode(), io.NewSectionReader(body, 0, up.size))
	if err != nil {
		return err
	}
	req.ContentLength = up.size
	if up.mime != "" {
		req.Header.Set("Content-Type", up.mime)
	}
	return s.doReplica(req, http.StatusCreated)
}

// forwardDelete deletes a needle on a replica; a replica that never had it is fine.
func (s *Server) forwardDelete(ctx context.Context, replica string, id fid.FileID) error {
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout(0))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete,
		security.URL(replica)+"/"+id.String()+"?type=replicate", nil)
	if err != nil {
		return err
	}
	return s.doReplica(req, http.StatusAccepted, http.StatusNotFound)
}

func (s *Server) doReplica(req *http.Request, ok ...int) error {
	resp, err := s.http.Do(req)
	if err != nil {
		// A replica that did not answer may sit behind pooled connections a
		// network cut left half-open (its address may even have changed):
		// the pool would hand the next write another of them and that write
		// would wait out its whole timeout too. Dropping the idle ones makes
		// the next write dial afresh, at the price of a few new handshakes.
		s.http.CloseIdleConnections()
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	for _, code := range ok {
		if resp.StatusCode == code {
			return nil
		}
	}
	return &errReplicaAnswer{status: resp.Status, msg: msg}
}

// reportDegradedWrite tells the master that a write of vid reached only the
// copies at written and waits for the master to record it (a few seconds at
// most): a write the master does not know about would never be copied to
// the others.
func (s *Server) reportDegradedWrite(vid uint32, written []string) error {
	s.mu.Lock()
	master := s.master
	s.mu.Unlock()
	err := errors.New("no master known")
	if master != "" {
		var addr string
		if addr, err = pb.GRPCAddress(master); err == nil {
			var conn *grpc.ClientConn
			if conn, err = s.conns.Get(addr); err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				_, err = masterpb.NewMasterClient(conn).ReportVolumeFailure(ctx, &masterpb.ReportVolumeFailureRequest{VolumeId: vid, WrittenUrls: written})
			}
		}
	}
	if err != nil {
		s.log.Warn("no master recorded a write short of copies: not acknowledged", "volume", vid, "written", written, "err", err)
	}
	return err
}

// reportFailure tells the master that a copy of vid failed a write, so it stops
// assigning the volume until every copy is healthy again.
func (s *Server) reportFailure(vid uint32, failed *errReplica) {
	s.log.Warn("replicated write failed", "volume", vid, "replica", failed.url, "err", failed.err, "unreachable", failed.unreachable())
	s.mu.Lock()
	master := s.master
	s.mu.Unlock()
	if master == "" {
		return
	}
	addr, err := pb.GRPCAddress(master)
	if err != nil {
		return
	}
	conn, err := s.conns.Get(addr)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = masterpb.NewMasterClient(conn).ReportVolumeFailure(ctx, &masterpb.ReportVolumeFailureRequest{
		VolumeId: vid, FailedUrl: failed.url, Error: failed.err.Error(), Unreachable: failed.unreachable(),
	})
	if err != nil {
		s.log.Warn("could not report volume failure to master", "master", master, "err", err)
	}
}

package master

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/pb/volumepb"
	"github.com/kelpfs/kelp/internal/topology"
)

// What a failed volume growth leaves behind, and how often it is tried.
//
// A volume is grown by allocating it on every server of its plan at once.
// When some allocations succeed and others fail, the copies that were made
// are deleted at once (rollBack): left alone they are volumes that can never
// be written (too few copies) yet fill the servers' slots, and every later
// assign would grow, and leave, another. A copy whose delete fails too is
// kept in a list, shown in /cluster/status as abandonedCopies and retried
// every pulse until its server deletes it (or no longer has it).
//
// After a growth with a failed allocation, automatic growth of that layout
// (and data center) pauses: 1s after the first failure, doubling up to 30s,
// reset by a growth without failures. Assigns in the pause fail at once with
// the 503 naming the last failure, so a cluster that cannot satisfy a code
// does not loop. An explicit /vol/grow is an operator's request and is always
// tried. Placement errors (ErrNoPlacement) have no side effects and do not
// pause growth: they are cheap and already say what is missing.
const (
	growthBackoffMin = time.Second
	growthBackoffMax = 30 * time.Second
	// deleteTimeout bounds one DeleteVolume of a rolled-back copy.
	deleteTimeout = 10 * time.Second
)

// growthBackoff holds the pause of each layout (by growLock name).
type growthBackoff struct {
	mu    sync.Mutex
	state map[string]backoffState
}

type backoffState struct {
	failures int
	until    time.Time
	last     error
}

// check returns an error while growth of name is paused.
func (b *growthBackoff) check(name string, now time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	st, ok := b.state[name]
	if !ok || !now.Before(st.until) {
		return nil
	}
	return fmt.Errorf("%w: %s is paused for %v after %d failed attempts in a row; last failure: %w",
		ErrGrowthFailed, name, st.until.Sub(now).Round(10*time.Millisecond), st.failures, st.last)
}

// record notes the outcome of one growth of name and returns the pause it
// starts (0 after a success).
func (b *growthBackoff) record(name string, err error, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil {
		delete(b.state, name)
		return 0
	}
	if b.state == nil {
		b.state = map[string]backoffState{}
	}
	st := b.state[name]
	st.failures++
	delay := growthBackoffMax
	if st.failures <= 6 { // 1s << 5 = 32s > max
		delay = min(growthBackoffMin<<(st.failures-1), growthBackoffMax)
	}
	st.until, st.last = now.Add(delay), err
	b.state[name] = st
	return delay
}

// AbandonedCopy is a copy of a volume whose growth failed part way and whose
// delete failed too: the master retries the delete every pulse.
type AbandonedCopy struct {
	VolumeID uint32    `json:"volumeId"`
	URL      string    `json:"url"`
	Since    time.Time `json:"since"`
	Error    string    `json:"error"`
	grpcPort int
}

// abandonedCopies is the retry list.
type abandonedCopies struct {
	mu       sync.Mutex
	copies   []AbandonedCopy
	retrying bool
}

func (a *abandonedCopies) add(c AbandonedCopy) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.copies = append(a.copies, c)
}

func (a *abandonedCopies) list() []AbandonedCopy {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := slices.Clone(a.copies)
	slices.SortFunc(out, func(x, y AbandonedCopy) int {
		return cmp.Or(cmp.Compare(x.VolumeID, y.VolumeID), cmp.Compare(x.URL, y.URL))
	})
	return out
}

// rollBack deletes the copies of volume vid made by a growth that failed
// (cause) on other servers. It runs on its own context: the assign that
// asked for the growth may be gone, and the copies must go anyway. Copies
// that only may exist (their allocation's answer was lost) go straight to
// the retry list: their server is likely the slow or cut-off one, and the
// growth must not wait on it once more.
func (s *Server) rollBack(ctx context.Context, vid uint32, made, maybe []topology.Location, cause error) {
	ctx = context.WithoutCancel(ctx)
	var deleted, kept []string
	for _, loc := range maybe {
		kept = append(kept, loc.URL)
		s.abandoned.add(AbandonedCopy{VolumeID: vid, URL: loc.URL, Since: time.Now().UTC(), Error: "allocation answer lost; may exist", grpcPort: loc.GRPCPort})
	}
	for _, loc := range made {
		if err := s.volumeClients.deleteVolume(ctx, loc, vid); err != nil {
			kept = append(kept, loc.URL)
			s.abandoned.add(AbandonedCopy{VolumeID: vid, URL: loc.URL, Since: time.Now().UTC(), Error: err.Error(), grpcPort: loc.GRPCPort})
			continue
		}
		deleted = append(deleted, loc.URL)
	}
	s.log.Warn("volume growth failed part way; rolled back the copies it made",
		"volume", vid, "deleted", deleted, "deleteFailedRetrying", kept, "err", cause)
}

// retryAbandoned tries once more to delete each abandoned copy whose server
// is connected. One retry round runs at a time.
func (s *Server) retryAbandoned() {
	a := &s.abandoned
	a.mu.Lock()
	if a.retrying || len(a.copies) == 0 {
		a.mu.Unlock()
		return
	}
	a.retrying = true
	todo := slices.Clone(a.copies)
	a.mu.Unlock()
	live := map[string]bool{}
	for _, n := range s.topo.Nodes(false) {
		live[n.URL] = n.Reachable
	}
	done := map[AbandonedCopy]bool{}
	for _, c := range todo {
		if !live[c.URL] {
			continue
		}
		err := s.volumeClients.deleteVolume(s.ctx, topology.Location{URL: c.URL, GRPCPort: c.grpcPort}, c.VolumeID)
		if err == nil {
			s.log.Info("deleted a copy abandoned by failed growth", "volume", c.VolumeID, "node", c.URL)
			done[c] = true
		}
	}
	a.mu.Lock()
	a.copies = slices.DeleteFunc(a.copies, func(c AbandonedCopy) bool { return done[c] })
	a.retrying = false
	a.mu.Unlock()
}

// mayExist reports whether a failed AllocateVolume may have created the
// copy anyway: when its answer was lost (deadline, cut connection). A copy
// that was refused (no slot, already there) is not ours to delete.
func mayExist(err error) bool {
	st, ok := status.FromError(err) // finds a wrapped status too
	if !ok {
		return false // failed before calling the server
	}
	switch st.Code() {
	case codes.DeadlineExceeded, codes.Canceled, codes.Unavailable, codes.Unknown:
		return true
	}
	return false
}

// deleteVolume deletes a volume's copy on one server; a copy that is not
// there counts as deleted.
func (c *volumeClients) deleteVolume(ctx context.Context, loc topology.Location, vid uint32) error {
	addr, err := grpcAddr(loc)
	if err != nil {
		return err
	}
	cc, err := c.conn(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, deleteTimeout)
	defer cancel()
	_, err = volumepb.NewVolumeServerClient(cc).DeleteVolume(ctx, &volumepb.DeleteVolumeRequest{VolumeId: vid})
	if status.Code(err) == codes.NotFound {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete volume %d on %s: %w", vid, loc.URL, err)
	}
	return nil
}

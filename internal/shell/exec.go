package shell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
	"google.golang.org/protobuf/proto"

	"github.com/kelpfs/kelp/internal/pb/masterpb"
	"github.com/kelpfs/kelp/internal/pb/volumepb"
	"github.com/kelpfs/kelp/internal/topology"
)

// cleanupTimeout bounds the calls that undo a cancelled or failed step; they
// run on a fresh context because the command's own may be cancelled.
const cleanupTimeout = 15 * time.Second

// runSteps executes a plan in order. Once a step of a volume fails, the
// volume's later steps are skipped, so no copy is deleted unless every copy
// planned to replace it is complete. It stops at cancellation or when the
// admin lock is lost.
func (s *Shell) runSteps(ctx context.Context, v *view, steps []topology.Step) error {
	failed := map[uint32]bool{}
	var errs []error
	s.track.plan("steps", len(steps))
	for i, st := range steps {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("shell: interrupted after %d of %d steps: %w", i, len(steps), err)
		}
		if err := s.requireLock(); err != nil {
			return fmt.Errorf("shell: stopped after %d of %d steps: %w", i, len(steps), err)
		}
		if failed[st.VolumeID] {
			fmt.Fprintf(s.out, "[%d/%d] skip: %s: an earlier step of volume %d failed\n", i+1, len(steps), st, st.VolumeID)
			s.track.done(1, true)
			continue
		}
		fmt.Fprintf(s.out, "[%d/%d] %s\n", i+1, len(steps), st)
		var err error
		switch st.Action {
		case topology.StepCopy:
			err = s.copyVolume(ctx, v, st.VolumeID, st.Source, st.Node)
		case topology.StepDelete:
			if len(v.holders(st.VolumeID)) < 2 {
				err = fmt.Errorf("shell: refusing to delete the last copy of volume %d", st.VolumeID)
			} else {
				err = s.deleteCopy(ctx, v, st.VolumeID, st.Node)
			}
		default:
			err = fmt.Errorf("shell: unknown step %v", st)
		}
		s.track.done(1, err != nil)
		if err != nil {
			failed[st.VolumeID] = true
			errs = append(errs, err)
			fmt.Fprintf(s.out, "  failed: %v\n", err)
			if ctx.Err() != nil {
				return fmt.Errorf("shell: interrupted at step %d of %d: %w", i+1, len(steps), errors.Join(errs...))
			}
			continue
		}
		fmt.Fprintln(s.out, "  done")
	}
	return errors.Join(errs...)
}

// copyVolume makes target pull volume id from source. Every copy of the
// volume is read-only while it runs, so the copy is exact; the ones that were
// writable are made writable again however it ends. A copy that did not
// complete, or does not match its source, is deleted from the target.
func (s *Shell) copyVolume(ctx context.Context, v *view, id uint32, source, target string) (err error) {
	if _, ok := v.copies[id][source]; !ok {
		return fmt.Errorf("%w: volume %d has no copy on %s", ErrNotFound, id, source)
	}
	if _, ok := v.copies[id][target]; ok {
		return fmt.Errorf("shell: %s already holds volume %d", target, id)
	}
	srcAddr, err := v.grpcAddr(source)
	if err != nil {
		return err
	}
	tc, err := s.volumeClient(v, target)
	if err != nil {
		return err
	}
	var writable []string
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		for _, u := range writable {
			if merr := s.markVolume(cctx, v, id, u, false); merr != nil {
				err = errors.Join(err, merr)
				fmt.Fprintf(s.err, "warning: volume %d on %s stays read-only: %v\n", id, u, merr)
			}
		}
	}()
	for _, u := range v.holders(id) {
		if v.copies[id][u].GetReadOnly() {
			continue
		}
		if err := s.markVolume(ctx, v, id, u, true); err != nil {
			return err
		}
		writable = append(writable, u)
	}
	if err := s.pullVolume(ctx, tc, id, srcAddr, target); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if _, derr := tc.DeleteVolume(cctx, &volumepb.DeleteVolumeRequest{VolumeId: id}); derr != nil {
			s.log.Debug("no partial copy to remove", "volume", id, "node", target, "err", derr)
		}
		return err
	}
	info, err := s.verifyCopy(ctx, v, id, source, target)
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		tc.DeleteVolume(cctx, &volumepb.DeleteVolumeRequest{VolumeId: id})
		return err
	}
	v.addCopy(id, target, info)
	if len(writable) > 0 {
		// The copy was taken read-only; it is as writable as its source was.
		writable = append(writable, target)
	}
	return nil
}

// pullVolume runs CopyVolume on the target and shows its progress.
func (s *Shell) pullVolume(ctx context.Context, tc volumepb.VolumeServerClient, id uint32, srcAddr, target string) error {
	stream, err := tc.CopyVolume(ctx, &volumepb.CopyVolumeRequest{VolumeId: id, SourceGrpcAddr: srcAddr})
	if err != nil {
		return fmt.Errorf("shell: copy volume %d to %s: %w", id, target, err)
	}
	p := s.newProgress(fmt.Sprintf("volume %d -> %s", id, target))
	defer p.finish()
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("shell: copy volume %d to %s: stream ended before the copy was done", id, target)
		}
		if err != nil {
			return fmt.Errorf("shell: copy volume %d to %s: %w", id, target, err)
		}
		p.update(msg.GetBytesCopied(), msg.GetBytesTotal())
		if msg.GetDone() {
			return nil
		}
	}
}

// verifyCopy checks that the new copy has what the (read-only) source has,
// and returns the new copy's info for the view.
func (s *Shell) verifyCopy(ctx context.Context, v *view, id uint32, source, target string) (*masterpb.VolumeInfo, error) {
	status := func(u string) (*volumepb.VolumeStatusResponse, error) {
		vc, err := s.volumeClient(v, u)
		if err != nil {
			return nil, err
		}
		return vc.VolumeStatus(ctx, &volumepb.VolumeStatusRequest{VolumeId: id})
	}
	src, err := status(source)
	if err != nil {
		return nil, fmt.Errorf("shell: status of volume %d on %s: %w", id, source, err)
	}
	dst, err := status(target)
	if err != nil {
		return nil, fmt.Errorf("shell: status of new copy of volume %d on %s: %w", id, target, err)
	}
	if src.GetSize() != dst.GetSize() || src.GetFileCount() != dst.GetFileCount() {
		return nil, fmt.Errorf("shell: copy of volume %d on %s does not match its source %s: %d files / %d bytes, source %d files / %d bytes",
			id, target, source, dst.GetFileCount(), dst.GetSize(), src.GetFileCount(), src.GetSize())
	}
	info := proto.Clone(v.copies[id][source]).(*masterpb.VolumeInfo)
	info.Size, info.FileCount, info.DeleteCount, info.DeletedBytes = dst.GetSize(), dst.GetFileCount(), dst.GetDeleteCount(), dst.GetDeletedBytes()
	return info, nil
}

// progress shows how far a long operation got.
type progress interface {
	update(done, total uint64)
	finish()
}

// newProgress shows a stream's advance (desc "": not shown) and counts
// its bytes for the tracker.
func (s *Shell) newProgress(desc string) progress {
	c := &countingProgress{t: s.track}
	switch {
	case desc == "":
	case s.cfg.Terminal:
		c.shown = &barProgress{w: s.err, desc: desc}
	default:
		c.shown = &lineProgress{w: s.out, desc: desc, next: 0}
	}
	return c
}

// barProgress draws a bar on a terminal; it is made on the first update,
// when the total is known.
type barProgress struct {
	w    io.Writer
	desc string
	bar  *progressbar.ProgressBar
}

func (p *barProgress) update(done, total uint64) {
	if p.bar == nil {
		p.bar = progressbar.NewOptions64(int64(total), progressbar.OptionSetWriter(p.w), progressbar.OptionShowBytes(true),
			progressbar.OptionSetDescription(p.desc), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	}
	p.bar.Set64(int64(done))
}

func (p *barProgress) finish() {
	if p.bar != nil {
		p.bar.Finish()
	}
}

// lineProgress prints a line at each quarter, for scripts and logs.
type lineProgress struct {
	w    io.Writer
	desc string
	next uint64 // next percentage to report
	last string
}

func (p *lineProgress) update(done, total uint64) {
	pct := uint64(100)
	if total > 0 {
		pct = min(100, done*100/total)
	}
	if pct < p.next {
		return
	}
	p.last = fmt.Sprintf("  %s: %s of %s (%d%%)", p.desc, bytesString(done), bytesString(total), pct)
	fmt.Fprintln(p.w, p.last)
	p.next = (pct/25 + 1) * 25
}

func (p *lineProgress) finish() {}

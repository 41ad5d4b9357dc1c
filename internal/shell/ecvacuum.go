package shell

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/kelpfs/kelp/internal/erasure"
	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/pb/volumepb"
	"github.com/kelpfs/kelp/internal/topology"
)

// ec.vacuum compacts EC volumes whose deleted needles take at least
// -garbageThreshold of their bytes. Each step is one the other EC commands
// already make crash safe, and at every moment one complete form of the
// volume exists:
//
//  1. ec.decode onto the holder with the most shards: a normal volume is
//     rebuilt from the shards (deleted needles tombstoned), synced and
//     loaded; only then are the shards removed. A crash before that leaves
//     the EC volume (and maybe a partial decode, which the next decode
//     replaces); a crash after it leaves a normal volume beside leftover
//     shards, which ec.decode -force (or ec.vacuum again) removes.
//  2. The normal volume is vacuumed (the volume package's compaction:
//     copy the live needles, swap atomically).
//  3. ec.encode of it, as ec.encode does: shards written, copied, each
//     verified on its holder, and only then the normal copy deleted.
//
// Between 1 and 3 the volume has a single normal copy: a disk lost then
// loses it (the EC volume would have survived m lost shards).

func setupECVacuum(fs *flag.FlagSet) runFunc {
	collection := fs.String("collection", "", "only volumes of this collection")
	id := fs.Uint("volumeId", 0, "only this volume")
	threshold := fs.Float64("garbageThreshold", 0.3, "compact EC volumes whose deleted needles take at least this share of their bytes (0..1)")
	force := fs.Bool("force", false, "apply the plan; without it only print it")
	return func(ctx context.Context, s *Shell, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if *threshold < 0 || *threshold > 1 {
			return fmt.Errorf("%w: -garbageThreshold must be between 0 and 1", ErrUsage)
		}
		v, err := s.planView(ctx, *force)
		if err != nil {
			return err
		}
		states := v.ecStates(*collection)
		if *id != 0 {
			states = slices.DeleteFunc(states, func(st ecState) bool { return st.id != uint32(*id) })
			if len(states) == 0 {
				return fmt.Errorf("%w: no EC volume %d on a live server", ErrNotFound, *id)
			}
		}
		states = s.probeECHolders(ctx, v, states)
		type job struct {
			st     ecState
			target string
		}
		var jobs []job
		for _, st := range states {
			if _, normal := v.copies[st.id]; normal {
				fmt.Fprintf(s.out, "volume %d: also a normal volume (an interrupted decode or encode): run ec.decode -volumeId=%d -force first\n", st.id, st.id)
				continue
			}
			if st.present.Count() < st.scheme.Data {
				fmt.Fprintf(s.out, "volume %d: only shards %s of %s: cannot be decoded, skipped\n", st.id, st.present, st.scheme)
				continue
			}
			deleted, files, dBytes, total, err := s.ecGarbage(ctx, v, st)
			if err != nil {
				fmt.Fprintf(s.out, "volume %d: %v\n", st.id, err)
				continue
			}
			ratio := 0.0
			if total > 0 {
				ratio = float64(dBytes) / float64(total)
			}
			if ratio < *threshold || deleted == 0 {
				fmt.Fprintf(s.out, "volume %d: %d of %d files deleted, garbage %.0f%%: below the threshold\n", st.id, deleted, files, 100*ratio)
				continue
			}
			target := ""
			for _, url := range slices.Sorted(maps.Keys(st.holders)) {
				if target == "" || st.holders[url].Count() > st.holders[target].Count() {
					target = url
				}
			}
			fmt.Fprintf(s.out, "volume %d: %d of %d files deleted, garbage %.0f%% (%s of %s): compact through a normal volume on %s, re-encode %s\n",
				st.id, deleted, files, 100*ratio, bytesString(uint64(dBytes)), bytesString(uint64(total)), target, st.scheme)
			jobs = append(jobs, job{st, target})
		}
		if len(jobs) == 0 {
			fmt.Fprintln(s.out, "no EC volume to vacuum")
			return nil
		}
		fmt.Fprintf(s.out, "plan: vacuum %d EC volumes\n", len(jobs))
		if !*force {
			fmt.Fprintln(s.out, "dry run: run again with -force to apply")
			return nil
		}
		var errs []error
		for n, j := range jobs {
			if err := s.requireLock(); err != nil {
				return err
			}
			fmt.Fprintf(s.out, "[%d/%d] vacuum EC volume %d\n", n+1, len(jobs), j.st.id)
			if err := s.vacuumECVolume(ctx, v, j.st, j.target); err != nil {
				fmt.Fprintf(s.out, "  failed: %v\n", err)
				errs = append(errs, err)
				if ctx.Err() != nil {
					break
				}
			}
		}
		return errors.Join(errs...)
	}
}

// ecGarbage reads the EC index and journal of st from a holder: deleted and
// indexed needles, the bytes of the deleted records and of the volume.
func (s *Shell) ecGarbage(ctx context.Context, v *view, st ecState) (deleted, files int, dBytes, total int64, err error) {
	var x, j bytes.Buffer
	err = errors.New("no holder answered")
	for _, url := range slices.Sorted(maps.Keys(st.holders)) {
		vc, cerr := s.volumeClient(v, url)
		if cerr != nil {
			err = cerr
			continue
		}
		x.Reset()
		j.Reset()
		if err = readECFile(ctx, vc, st.id, ".ecx", &x); err == nil {
			err = readECFile(ctx, vc, st.id, ".ecj", &j)
		}
		if err == nil {
			break
		}
	}
	if err != nil {
		return 0, 0, 0, 0, fmt.Errorf("reading its index: %w", err)
	}
	idx, err := erasure.ParseIndex(x.Bytes())
	if err != nil {
		return 0, 0, 0, 0, err
	}
	keys, _ := erasure.ParseJournal(j.Bytes())
	gone := map[uint64]bool{}
	for _, k := range keys {
		gone[k] = true
	}
	for _, e := range idx.Entries {
		if gone[e.Key] {
			deleted++
			dBytes += needle.RecordSize(e.Size)
		}
	}
	return deleted, len(idx.Entries), dBytes, idx.Layout.DatSize, nil
}

// vacuumECVolume decodes, compacts and re-encodes one EC volume.
func (s *Shell) vacuumECVolume(ctx context.Context, v *view, st ecState, target string) error {
	before := int64(0)
	for _, e := range v.ecShards()[st.id] {
		before += int64(erasure.ShardSet(e.GetShards()).Count()) * int64(e.GetShardSize())
	}
	if err := s.decodeVolume(ctx, v, st, target); err != nil {
		return err
	}
	// The normal volume must be in the master's view to be encoded.
	var v2 *view
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		nv, err := s.fetchView(wctx)
		if err == nil && len(nv.copies[st.id]) > 0 {
			if _, ec := nv.ecShards()[st.id]; !ec {
				v2 = nv
				break
			}
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("shell: volume %d is a normal volume on %s, but the master does not show it (run ec.encode -volumeId=%d -force later): %w", st.id, target, st.id, wctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	vc, err := s.volumeClient(v2, target)
	if err != nil {
		return err
	}
	resp, err := vc.VacuumVolume(ctx, &volumepb.VacuumVolumeRequest{VolumeId: st.id, GarbageThreshold: 0})
	if err != nil {
		return fmt.Errorf("shell: volume %d is a normal volume on %s, but compacting it failed (ec.encode -volumeId=%d -force encodes it as it is): %w", st.id, target, st.id, err)
	}
	fmt.Fprintf(s.out, "  compacted %s -> %s\n", bytesString(resp.GetSizeBefore()), bytesString(resp.GetSizeAfter()))
	load := shardLoad(v2.ecShards())
	p := topology.NewShardPlacer(v2.snapshot(), load)
	place := map[string]erasure.ShardSet{}
	for i := range st.scheme.Total() {
		url, err := p.Next()
		if err != nil {
			return err
		}
		place[url] = place[url].With(i)
		load[url]++
	}
	if err := s.encodeVolume(ctx, v2, st.id, st.scheme, place); err != nil {
		return fmt.Errorf("shell: volume %d is a compacted normal volume on %s, but encoding it again failed (run ec.encode -volumeId=%d -force): %w", st.id, target, st.id, err)
	}
	after := int64(st.scheme.Total()) * erasure.ShardFileSize(erasure.NewLayout(st.scheme, int64(resp.GetSizeAfter())))
	fmt.Fprintf(s.out, "  done: shards %s -> about %s\n", bytesString(uint64(before)), bytesString(uint64(after)))
	return nil
}

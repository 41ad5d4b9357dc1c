package shell

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kelpfs/kelp/internal/erasure"
	"github.com/kelpfs/kelp/internal/pb/masterpb"
	"github.com/kelpfs/kelp/internal/pb/volumepb"
	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/topology"
)

func volumeCommands() []command {
	return []command{
		{name: "volume.list", summary: "show data centers, racks, servers, disks and their volumes", setup: setupVolumeList},
		{name: "volume.configure.replication", summary: "change a volume's replication code on every copy", setup: setupConfigureReplication},
		{name: "volume.mark", summary: "mark a volume read-only or writable on every copy (or one node)", setup: setupMark},
		{name: "volume.vacuum", summary: "compact volumes whose garbage ratio reaches a threshold", setup: setupVacuum},
		{name: "volume.delete", summary: "delete one copy of a volume from a node", setup: setupVolumeDelete},
	}
}

func setupVolumeList(fs *flag.FlagSet) runFunc {
	collection := fs.String("collection", "", "only volumes of this collection")
	return func(ctx context.Context, s *Shell, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		v, err := s.fetchView(ctx)
		if err != nil {
			return err
		}
		h := s.fetchHealth(ctx)
		filter := func(vol *masterpb.VolumeInfo) bool { return *collection == "" || vol.GetCollection() == *collection }
		r := v.resp
		fmt.Fprintf(s.out, "Topology: volume size limit %s, default replication %s\n", bytesString(r.GetVolumeSizeLimit()), orDefault(r.GetDefaultReplication(), "000"))
		for _, dc := range r.GetDataCenters() {
			fmt.Fprintf(s.out, "  DataCenter %s\n", dc.GetId())
			for _, rack := range dc.GetRacks() {
				fmt.Fprintf(s.out, "    Rack %s\n", rack.GetId())
				for _, n := range rack.GetNodes() {
					used, slots := 0, 0
					for _, d := range n.GetDisks() {
						used += len(d.GetVolumes())
						slots += int(d.GetMaxVolumes())
					}
					reach := ""
					if why, bad := h.unreachable[n.GetUrl()]; bad {
						reach = "  UNREACHABLE " + why
					}
					fmt.Fprintf(s.out, "      Server %s  volumes %d/%d%s\n", n.GetUrl(), used, slots, reach)
					for _, d := range n.GetDisks() {
						fmt.Fprintf(s.out, "        Disk %s  volumes %d/%d  free %s\n", d.GetDir(), len(d.GetVolumes()), d.GetMaxVolumes(), bytesString(d.GetFreeBytes()))
						vols := slices.Clone(d.GetVolumes())
						slices.SortFunc(vols, func(a, b *masterpb.VolumeInfo) int { return int(a.GetId()) - int(b.GetId()) })
						for _, vol := range vols {
							if filter(vol) {
								fmt.Fprintf(s.out, "          %s\n", volumeLine(vol))
							}
						}
						for _, e := range d.GetEcShards() {
							if *collection == "" || e.GetCollection() == *collection {
								fmt.Fprintf(s.out, "          %s\n", ecLine(e))
							}
						}
					}
				}
			}
		}
		printECSummary(s, v, *collection)
		h.printUnderReplicated(s, *collection)
		// From the heartbeats alone, which is cheap; volume.fix.replication
		// checks the copies live.
		printDivergent(s, topology.FindDivergentCopies(v.snapshot(), time.Now(), 2*h.pulse), *collection, "by their last heartbeats")
		return nil
	}
}

// printECSummary lists the EC volumes with their scheme and the shards no
// live server holds.
func printECSummary(s *Shell, v *view, collection string) {
	states := v.ecStates(collection)
	if len(states) == 0 {
		return
	}
	fmt.Fprintf(s.out, "EC volumes: %d\n", len(states))
	for _, st := range states {
		miss := st.missing()
		state := "complete"
		switch {
		case st.present.Count() < st.scheme.Data:
			state = fmt.Sprintf("missing shards [%s]: fewer than %d left, files in lost data shards are unreadable", miss, st.scheme.Data)
		case miss != 0:
			state = fmt.Sprintf("missing shards [%s] (%d): run ec.rebuild", miss, miss.Count())
		}
		fmt.Fprintf(s.out, "  ec volume %d  collection %q  scheme %s  shards %d/%d on %d servers  %s\n",
			st.id, st.collection, st.scheme, st.present.Count(), st.scheme.Total(), len(st.holders), state)
	}
}

func ecLine(e *masterpb.EcShardInfo) string {
	shards := erasure.ShardSet(e.GetShards())
	return fmt.Sprintf("ec volume %d  collection %q  scheme %s  shards [%s] (%d)  shard size %s  files %d  deleted %d",
		e.GetId(), e.GetCollection(), e.GetScheme(), shards, shards.Count(), bytesString(e.GetShardSize()), e.GetFileCount(), e.GetDeleteCount())
}

func volumeLine(v *masterpb.VolumeInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "volume %d  replication %s  size %s  files %d  deleted %d (%s)",
		v.GetId(), orDefault(v.GetReplication(), "000"), bytesString(v.GetSize()), v.GetFileCount(), v.GetDeleteCount(), bytesString(v.GetDeletedBytes()))
	if v.GetCollection() != "" {
		fmt.Fprintf(&b, "  collection %s", v.GetCollection())
	}
	if v.GetTtl() != "" {
		fmt.Fprintf(&b, "  ttl %s", v.GetTtl())
	}
	if v.GetReadOnly() {
		b.WriteString("  read-only")
	} else {
		b.WriteString("  writable")
	}
	return b.String()
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// volumeHolders returns the nodes holding a volume, or ErrNotFound.
func volumeHolders(v *view, id uint32) ([]string, error) {
	h := v.holders(id)
	if len(h) == 0 {
		return nil, fmt.Errorf("%w: volume %d is on no live volume server", ErrNotFound, id)
	}
	return h, nil
}

func (s *Shell) volumeClient(v *view, url string) (volumepb.VolumeServerClient, error) {
	addr, err := v.grpcAddr(url)
	if err != nil {
		return nil, err
	}
	return s.conns.volume(addr)
}

func setupConfigureReplication(fs *flag.FlagSet) runFunc {
	id := fs.Uint("volumeId", 0, "the volume")
	code := fs.String("replication", "", "the new replication code XYZ")
	return func(ctx context.Context, s *Shell, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if *id == 0 || *code == "" {
			return fmt.Errorf("%w: -volumeId and -replication are required", ErrUsage)
		}
		c, err := replication.Parse(*code)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrUsage, err)
		}
		if err := s.requireLock(); err != nil {
			return err
		}
		v, err := s.fetchView(ctx)
		if err != nil {
			return err
		}
		holders, err := volumeHolders(v, uint32(*id))
		if err != nil {
			return err
		}
		var errs []error
		for _, u := range holders {
			vc, err := s.volumeClient(v, u)
			if err == nil {
				_, err = vc.ConfigureVolume(ctx, &volumepb.ConfigureVolumeRequest{VolumeId: uint32(*id), Replication: c.String()})
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("volume %d on %s: %w", *id, u, err))
				fmt.Fprintf(s.out, "volume %d on %s: failed: %v\n", *id, u, err)
				continue
			}
			fmt.Fprintf(s.out, "volume %d on %s: replication %s\n", *id, u, c)
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		if len(holders) != c.Copies() {
			fmt.Fprintf(s.out, "volume %d has %d copies, replication %s wants %d: run volume.fix.replication\n", *id, len(holders), c, c.Copies())
		}
		return nil
	}
}

func setupMark(fs *flag.FlagSet) runFunc {
	id := fs.Uint("volumeId", 0, "the volume")
	ro := fs.Bool("readonly", false, "mark read-only")
	rw := fs.Bool("writable", false, "mark writable")
	node := fs.String("node", "", "only the copy on this volume server (host:port); default every copy")
	return func(ctx context.Context, s *Shell, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if *id == 0 || *ro == *rw {
			return fmt.Errorf("%w: -volumeId and exactly one of -readonly or -writable are required", ErrUsage)
		}
		if err := s.requireLock(); err != nil {
			return err
		}
		v, err := s.fetchView(ctx)
		if err != nil {
			return err
		}
		holders, err := volumeHolders(v, uint32(*id))
		if err != nil {
			return err
		}
		if *node != "" {
			if !slices.Contains(holders, *node) {
				return fmt.Errorf("%w: volume %d has no copy on %s", ErrNotFound, *id, *node)
			}
			holders = []string{*node}
		}
		state := "writable"
		if *ro {
			state = "read-only"
		}
		for _, u := range holders {
			if err := s.markVolume(ctx, v, uint32(*id), u, *ro); err != nil {
				return err
			}
			fmt.Fprintf(s.out, "volume %d on %s: %s\n", *id, u, state)
		}
		return nil
	}
}

func (s *Shell) markVolume(ctx context.Context, v *view, id uint32, url string, readOnly bool) error {
	vc, err := s.volumeClient(v, url)
	if err == nil {
		_, err = vc.MarkVolume(ctx, &volumepb.MarkVolumeRequest{VolumeId: id, ReadOnly: readOnly})
	}
	if err != nil {
		return fmt.Errorf("shell: mark volume %d on %s: %w", id, url, err)
	}
	return nil
}

func setupVacuum(fs *flag.FlagSet) runFunc {
	threshold := fs.Float64("garbageThreshold", 0.3, "vacuum copies whose garbage ratio is at least this (0..1)")
	id := fs.Uint("volumeId", 0, "only this volume")
	collection := fs.String("collection", "", "only volumes of this collection")
	return func(ctx context.Context, s *Shell, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if *threshold < 0 || *threshold > 1 {
			return fmt.Errorf("%w: -garbageThreshold must be between 0 and 1", ErrUsage)
		}
		if err := s.requireLock(); err != nil {
			return err
		}
		v, err := s.fetchView(ctx)
		if err != nil {
			return err
		}
		var errs []error
		vacuumed := 0
		for _, vid := range v.volumeIDs() {
			if (*id != 0 && vid != uint32(*id)) || (*collection != "" && v.anyCopy(vid).GetCollection() != *collection) {
				continue
			}
			for _, u := range v.holders(vid) {
				if err := ctx.Err(); err != nil {
					return err
				}
				vc, err := s.volumeClient(v, u)
				var resp *volumepb.VacuumVolumeResponse
				if err == nil {
					resp, err = vc.VacuumVolume(ctx, &volumepb.VacuumVolumeRequest{VolumeId: vid, GarbageThreshold: *threshold})
				}
				switch {
				case err != nil:
					errs = append(errs, fmt.Errorf("volume %d on %s: %w", vid, u, err))
					fmt.Fprintf(s.out, "volume %d on %s: vacuum failed: %v\n", vid, u, err)
				case resp.GetVacuumed():
					vacuumed++
					fmt.Fprintf(s.out, "volume %d on %s: garbage %.0f%%, vacuumed %s -> %s\n", vid, u,
						100*resp.GetGarbageRatioBefore(), bytesString(resp.GetSizeBefore()), bytesString(resp.GetSizeAfter()))
				default:
					fmt.Fprintf(s.out, "volume %d on %s: garbage %.0f%%, below threshold\n", vid, u, 100*resp.GetGarbageRatioBefore())
				}
			}
		}
		fmt.Fprintf(s.out, "vacuumed %d copies\n", vacuumed)
		return errors.Join(errs...)
	}
}

func setupVolumeDelete(fs *flag.FlagSet) runFunc {
	id := fs.Uint("volumeId", 0, "the volume")
	node := fs.String("node", "", "the volume server (host:port) whose copy to delete")
	force := fs.Bool("force", false, "delete even the last copy of the volume")
	return func(ctx context.Context, s *Shell, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if *id == 0 || *node == "" {
			return fmt.Errorf("%w: -volumeId and -node are required", ErrUsage)
		}
		if err := s.requireLock(); err != nil {
			return err
		}
		v, err := s.fetchView(ctx)
		if err != nil {
			return err
		}
		holders, err := volumeHolders(v, uint32(*id))
		if err != nil {
			return err
		}
		if !slices.Contains(holders, *node) {
			return fmt.Errorf("%w: volume %d has no copy on %s (copies: %s)", ErrNotFound, *id, *node, strings.Join(holders, ", "))
		}
		if len(holders) == 1 && !*force {
			return fmt.Errorf("%w: %s holds the only copy of volume %d; add -force to delete it and its data", ErrUsage, *node, *id)
		}
		if err := s.deleteCopy(ctx, v, uint32(*id), *node); err != nil {
			return err
		}
		fmt.Fprintf(s.out, "volume %d deleted on %s\n", *id, *node)
		return nil
	}
}

func (s *Shell) deleteCopy(ctx context.Context, v *view, id uint32, url string) error {
	vc, err := s.volumeClient(v, url)
	if err == nil {
		_, err = vc.DeleteVolume(ctx, &volumepb.DeleteVolumeRequest{VolumeId: id})
	}
	if err != nil {
		return fmt.Errorf("shell: delete volume %d on %s: %w", id, url, err)
	}
	v.removeCopy(id, url)
	return nil
}

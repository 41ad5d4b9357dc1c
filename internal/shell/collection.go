package shell

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
)

func collectionCommands() []command {
	return []command{
		{name: "collection.list", summary: "list collections with their volumes, files and sizes", setup: setupCollectionList},
		{name: "collection.delete", summary: "delete every volume of a collection on every server (dry run without -force)", setup: setupCollectionDelete},
	}
}

type collectionStats struct {
	volumes, copies int
	files, size     uint64
}

func setupCollectionList(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, s *Shell, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		v, err := s.fetchView(ctx)
		if err != nil {
			return err
		}
		stats := map[string]*collectionStats{}
		for _, id := range v.volumeIDs() {
			info := v.anyCopy(id)
			st := stats[info.GetCollection()]
			if st == nil {
				st = &collectionStats{}
				stats[info.GetCollection()] = st
			}
			st.volumes++
			st.copies += len(v.copies[id])
			st.files += info.GetFileCount()
			st.size += info.GetSize()
		}
		for name := range v.resp.GetCollectionReplication() {
			if stats[name] == nil {
				stats[name] = &collectionStats{}
			}
		}
		for name := range v.resp.GetWritePolicy() {
			if stats[name] == nil && name != "" {
				stats[name] = &collectionStats{}
			}
		}
		if len(stats) == 0 {
			fmt.Fprintln(s.out, "no collections")
			return nil
		}
		for _, name := range slices.Sorted(maps.Keys(stats)) {
			st := stats[name]
			label := fmt.Sprintf("collection %q", name)
			if name == "" {
				label = "default collection"
			}
			fmt.Fprintf(s.out, "%s: %d volumes, %d copies, %d files, %s", label, st.volumes, st.copies, st.files, bytesString(st.size))
			if r, ok := v.resp.GetCollectionReplication()[name]; ok {
				fmt.Fprintf(s.out, ", replication %s", r)
			}
			pol, ok := v.resp.GetWritePolicy()[name]
			if !ok {
				pol = v.resp.GetWritePolicy()[""]
			}
			fmt.Fprintf(s.out, ", write policy %s", describePolicy(pol))
			fmt.Fprintln(s.out)
		}
		return nil
	}
}

func setupCollectionDelete(fs *flag.FlagSet) runFunc {
	name := fs.String("collection", "", "the collection to delete")
	force := fs.Bool("force", false, "delete; without it only list what would go")
	return func(ctx context.Context, s *Shell, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if *name == "" {
			return fmt.Errorf("%w: -collection is required (the default collection cannot be deleted)", ErrUsage)
		}
		v, err := s.planView(ctx, *force)
		if err != nil {
			return err
		}
		var ids []uint32
		for _, id := range v.volumeIDs() {
			if v.anyCopy(id).GetCollection() == *name {
				ids = append(ids, id)
			}
		}
		ecVols := v.ecStates(*name)
		if len(ids) == 0 && len(ecVols) == 0 {
			return fmt.Errorf("%w: collection %q has no volumes", ErrNotFound, *name)
		}
		var errs []error
		for _, st := range ecVols {
			for _, u := range slices.Sorted(maps.Keys(st.holders)) {
				if !*force {
					fmt.Fprintf(s.out, "would delete shards [%s] of EC volume %d on %s\n", st.holders[u], st.id, u)
					continue
				}
				if err := s.removeShards(ctx, v, st.id, []string{u}); err != nil {
					errs = append(errs, err)
					fmt.Fprintf(s.out, "EC volume %d on %s: %v\n", st.id, u, err)
					continue
				}
				fmt.Fprintf(s.out, "deleted shards [%s] of EC volume %d on %s\n", st.holders[u], st.id, u)
			}
		}
		for _, id := range ids {
			for _, u := range v.holders(id) {
				if !*force {
					fmt.Fprintf(s.out, "would delete volume %d on %s\n", id, u)
					continue
				}
				if err := ctx.Err(); err != nil {
					return err
				}
				if err := s.deleteCopy(ctx, v, id, u); err != nil {
					errs = append(errs, err)
					fmt.Fprintf(s.out, "volume %d on %s: %v\n", id, u, err)
					continue
				}
				fmt.Fprintf(s.out, "deleted volume %d on %s\n", id, u)
			}
		}
		if !*force {
			fmt.Fprintln(s.out, "dry run: run again with -force to delete")
		}
		return errors.Join(errs...)
	}
}

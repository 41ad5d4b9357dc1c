package shell

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/topology"
)

func moveCommands() []command {
	return []command{
		{name: "volume.fix.replication", summary: "copy volumes whose copies do not satisfy their replication code and remove misplaced copies (dry run without -force)", setup: setupFixReplication},
		{name: "volume.balance", summary: "even out volume counts per server within placement rules (dry run without -force)", setup: setupBalance},
		{name: "volume.move", summary: "move one copy of a volume from one server to another", setup: setupMove},
	}
}

func setupFixReplication(fs *flag.FlagSet) runFunc {
	force := fs.Bool("force", false, "apply the plan; without it only print it")
	collection := fs.String("collection", "", "only volumes of this collection")
	return func(ctx context.Context, s *Shell, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		v, err := s.planView(ctx, *force)
		if err != nil {
			return err
		}
		h := s.fetchHealth(ctx)
		h.printUnreachable(s)
		nodes, stranded := h.plannable(v.snapshot())
		plan := topology.PlanReplicationFix(nodes)
		steps := filterCollection(plan.Steps, *collection)
		for _, id := range slices.Sorted(maps.Keys(stranded)) {
			if *collection == "" || v.anyCopy(id).GetCollection() == *collection {
				fmt.Fprintf(s.out, "cannot fix volume %d: every copy is on an unreachable server (%s)\n", id, strings.Join(stranded[id], ", "))
			}
		}
		for _, p := range plan.Unfixable {
			if *collection == "" || p.Collection == *collection {
				fmt.Fprintf(s.out, "cannot fix volume %d: %v\n", p.VolumeID, p.Err)
			}
		}
		printDivergent(s, s.divergentCopies(ctx, v, h), *collection, "checked live on each reachable copy")
		if len(steps) == 0 {
			fmt.Fprintln(s.out, "every volume that can be fixed satisfies its replication")
			return nil
		}
		return s.applyPlan(ctx, v, steps, *force)
	}
}

func setupBalance(fs *flag.FlagSet) runFunc {
	force := fs.Bool("force", false, "apply the plan; without it only print it")
	return func(ctx context.Context, s *Shell, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		v, err := s.planView(ctx, *force)
		if err != nil {
			return err
		}
		h := s.fetchHealth(ctx)
		h.printUnreachable(s)
		nodes, _ := h.plannable(v.snapshot())
		steps := topology.PlanBalance(nodes)
		if len(steps) == 0 {
			fmt.Fprintln(s.out, "volumes are balanced")
			return nil
		}
		return s.applyPlan(ctx, v, steps, *force)
	}
}

func (s *Shell) applyPlan(ctx context.Context, v *view, steps []topology.Step, force bool) error {
	if !force {
		fmt.Fprintf(s.out, "plan (%d steps):\n", len(steps))
		for _, st := range steps {
			fmt.Fprintf(s.out, "  %s\n", st)
		}
		fmt.Fprintln(s.out, "dry run: run again with -force to apply")
		return nil
	}
	if err := s.runSteps(ctx, v, steps); err != nil {
		return err
	}
	fmt.Fprintf(s.out, "applied %d steps\n", len(steps))
	return nil
}

// filterCollection keeps the steps of one collection (all when c is empty).
func filterCollection(steps []topology.Step, c string) []topology.Step {
	if c == "" {
		return steps
	}
	return slices.DeleteFunc(slices.Clone(steps), func(st topology.Step) bool { return st.Collection != c })
}

func setupMove(fs *flag.FlagSet) runFunc {
	id := fs.Uint("volumeId", 0, "the volume")
	source := fs.String("source", "", "the volume server (host:port) that holds the copy")
	target := fs.String("target", "", "the volume server (host:port) to move it to")
	return func(ctx context.Context, s *Shell, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if *id == 0 || *source == "" || *target == "" {
			return fmt.Errorf("%w: -volumeId, -source and -target are required", ErrUsage)
		}
		if err := s.requireLock(); err != nil {
			return err
		}
		v, err := s.fetchView(ctx)
		if err != nil {
			return err
		}
		vid := uint32(*id)
		holders, err := volumeHolders(v, vid)
		if err != nil {
			return err
		}
		if !slices.Contains(holders, *source) {
			return fmt.Errorf("%w: volume %d has no copy on %s", ErrNotFound, vid, *source)
		}
		if v.nodes[*target] == nil {
			return fmt.Errorf("%w: no live volume server %s", ErrNotFound, *target)
		}
		if slices.Contains(holders, *target) {
			return fmt.Errorf("%w: %s already holds volume %d", ErrUsage, *target, vid)
		}
		// Say so when the move breaks a valid placement; the operator may be
		// evacuating a server on purpose.
		code, _ := replication.Parse(v.anyCopy(vid).GetReplication())
		after := slices.Clone(holders)
		after[slices.Index(after, *source)] = *target
		if topology.CheckPlacement(code, v.locations(holders)) == nil {
			if err := topology.CheckPlacement(code, v.locations(after)); err != nil {
				fmt.Fprintf(s.out, "warning: after the move, volume %d breaks its placement: %v\n", vid, err)
			}
		}
		steps := []topology.Step{
			{Action: topology.StepCopy, VolumeID: vid, Collection: v.anyCopy(vid).GetCollection(), Source: *source, Node: *target, Reason: "move"},
			{Action: topology.StepDelete, VolumeID: vid, Collection: v.anyCopy(vid).GetCollection(), Node: *source, Reason: "move"},
		}
		if err := s.runSteps(ctx, v, steps); err != nil {
			return err
		}
		fmt.Fprintf(s.out, "volume %d moved from %s to %s\n", vid, *source, *target)
		return nil
	}
}

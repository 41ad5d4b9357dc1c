package shell

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kelpfs/kelp/internal/erasure"
	"github.com/kelpfs/kelp/internal/pb/masterpb"
	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/topology"
)

func clusterCommands() []command {
	return []command{
		{name: "cluster.status", summary: "show the masters, their Raft roles and the leader, and the volume servers",
			setup: func(fs *flag.FlagSet) runFunc {
				return func(ctx context.Context, s *Shell, args []string) error {
					if err := noArgs(args); err != nil {
						return err
					}
					var resp *masterpb.ClusterStatusResponse
					err := s.conns.master(ctx, func(m masterpb.MasterClient) (err error) {
						resp, err = m.ClusterStatus(ctx, &masterpb.ClusterStatusRequest{})
						return err
					})
					if err != nil {
						return fmt.Errorf("shell: cluster status: %w", err)
					}
					var buf bytes.Buffer
					if err := json.Indent(&buf, resp.GetJson(), "", "  "); err != nil {
						return fmt.Errorf("shell: cluster status: master answered bad JSON: %w", err)
					}
					buf.WriteByte('\n')
					_, err = s.out.Write(buf.Bytes())
					return err
				}
			}},
		{name: "cluster.configure", summary: "set the default replication, erasure-coding scheme or write policy of the cluster or of one collection, at run time",
			setup: func(fs *flag.FlagSet) runFunc {
				code := fs.String("replication", "", "replication code XYZ (X other data centers, Y other racks, Z other servers)")
				collection := fs.String("collection", "", "set the collection's default instead of the cluster's")
				ec := fs.String("ec", "", "erasure-coding scheme k+m that ec.encode uses (e.g. 10+4, 6+3)")
				policy := fs.String("writePolicy", "", "strict (a write needs every copy) or degraded (a write needs -minCopies reachable copies; the rest are caught up later)")
				minCopies := fs.Int("minCopies", 0, "with -writePolicy=degraded: copies a write needs (default 1)")
				return func(ctx context.Context, s *Shell, args []string) error {
					if err := noArgs(args); err != nil {
						return err
					}
					if *code == "" && *ec == "" && *policy == "" {
						return fmt.Errorf("%w: -replication, -ec or -writePolicy is required", ErrUsage)
					}
					if *minCopies < 0 || *minCopies > 1<<16 {
						return fmt.Errorf("%w: -minCopies %d must be at least 1", ErrUsage, *minCopies)
					}
					if *policy != "" || *minCopies != 0 {
						if *policy == "" {
							return fmt.Errorf("%w: -minCopies needs -writePolicy=degraded", ErrUsage)
						}
						if _, err := topology.ParseWritePolicy(*policy, *minCopies); err != nil || strings.Contains(*policy, ":") {
							return fmt.Errorf("%w: -writePolicy %q: want strict or degraded (and -minCopies only with degraded)", ErrUsage, *policy)
						}
					}
					if _, err := replication.Parse(*code); *code != "" && err != nil {
						return fmt.Errorf("%w: %w", ErrUsage, err)
					}
					if _, err := erasure.ParseScheme(*ec); *ec != "" && err != nil {
						return fmt.Errorf("%w: %w", ErrUsage, err)
					}
					if err := s.requireLock(); err != nil {
						return err
					}
					var resp *masterpb.ConfigureResponse
					err := s.conns.master(ctx, func(m masterpb.MasterClient) (err error) {
						resp, err = m.Configure(ctx, &masterpb.ConfigureRequest{LockToken: s.lockToken(), Collection: *collection, Replication: *code, EcScheme: *ec,
							WritePolicy: *policy, MinCopies: uint32(*minCopies)})
						return err
					})
					if err != nil {
						return fmt.Errorf("shell: configure: %w", err)
					}
					printReplicationSettings(s, resp.GetDefaultReplication(), resp.GetCollectionReplication())
					printECSettings(s, resp.GetEcScheme())
					printWritePolicies(s, resp.GetWritePolicy())
					return nil
				}
			}},
	}
}

func printECSettings(s *Shell, schemes map[string]string) {
	fmt.Fprintf(s.out, "default erasure coding: %s\n", orDefault(schemes[""], erasure.DefaultScheme.String()))
	for _, c := range slices.Sorted(maps.Keys(schemes)) {
		if c != "" {
			fmt.Fprintf(s.out, "collection %q erasure coding: %s\n", c, schemes[c])
		}
	}
}

// printWritePolicies shows the write policies ("" = the cluster default).
func printWritePolicies(s *Shell, policies map[string]string) {
	fmt.Fprintf(s.out, "default write policy: %s\n", describePolicy(policies[""]))
	for _, c := range slices.Sorted(maps.Keys(policies)) {
		if c != "" {
			fmt.Fprintf(s.out, "collection %q write policy: %s\n", c, describePolicy(policies[c]))
		}
	}
}

// describePolicy turns a stored write policy into words.
func describePolicy(stored string) string {
	p, err := topology.ParseWritePolicy(stored, 0)
	switch {
	case err != nil:
		return stored
	case p.Degraded:
		return fmt.Sprintf("degraded (minCopies %d)", p.MinCopies)
	}
	return "strict"
}

func printReplicationSettings(s *Shell, def string, perCollection map[string]string) {
	fmt.Fprintf(s.out, "default replication: %s\n", def)
	for _, c := range slices.Sorted(maps.Keys(perCollection)) {
		fmt.Fprintf(s.out, "collection %q replication: %s\n", c, perCollection[c])
	}
}

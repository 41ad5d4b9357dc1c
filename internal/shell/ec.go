package shell

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/erasure"
	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
	"github.com/kelpfs/kelp/internal/pb/masterpb"
	"github.com/kelpfs/kelp/internal/pb/volumepb"
	"github.com/kelpfs/kelp/internal/topology"
)

func ecCommands() []command {
	return []command{
		{name: "ec.encode", summary: "erasure-code sealed volumes: encode, spread shards, verify, then delete the original copies (dry run without -force)", setup: setupECEncode},
		{name: "ec.rebuild", summary: "rebuild missing shards of EC volumes from the remaining ones (dry run without -force)", setup: setupECRebuild},
		{name: "ec.balance", summary: "spread EC shards evenly over data centers, racks and servers (dry run without -force)", setup: setupECBalance},
		{name: "ec.decode", summary: "turn an EC volume back into a normal volume (dry run without -force)", setup: setupECDecode},
		{name: "ec.vacuum", summary: "compact EC volumes with enough deleted needles: decode, vacuum, encode again (dry run without -force)", setup: setupECVacuum},
	}
}

// ecView indexes the EC shards of a topology answer: volume id -> node URL -> info.
func (v *view) ecShards() map[uint32]map[string]*masterpb.EcShardInfo {
	out := map[uint32]map[string]*masterpb.EcShardInfo{}
	for url, n := range v.nodes {
		for _, d := range n.GetDisks() {
			for _, e := range d.GetEcShards() {
				if out[e.GetId()] == nil {
					out[e.GetId()] = map[string]*masterpb.EcShardInfo{}
				}
				if old := out[e.GetId()][url]; old != nil {
					merged := proto.Clone(old).(*masterpb.EcShardInfo)
					merged.Shards |= e.GetShards()
					out[e.GetId()][url] = merged
				} else {
					out[e.GetId()][url] = e
				}
			}
		}
	}
	return out
}

// shardLoad is how many EC shards each node holds.
func shardLoad(ec map[uint32]map[string]*masterpb.EcShardInfo) map[string]int {
	load := map[string]int{}
	for _, holders := range ec {
		for url, e := range holders {
			load[url] += erasure.ShardSet(e.GetShards()).Count()
		}
	}
	return load
}

func setupECEncode(fs *flag.FlagSet) runFunc {
	collection := fs.String("collection", "", "only volumes of this collection")
	id := fs.Uint("volumeId", 0, "only this volume")
	fullPercent := fs.Float64("fullPercent", 95, "encode volumes at least this full (percent of the volume size limit)")
	quietFor := fs.Duration("quietFor", time.Hour, "encode volumes not written to for at least this long")
	schemeFlag := fs.String("scheme", "", "Reed-Solomon scheme k+m; default: the collection's (cluster.configure -ec), else 10+4")
	force := fs.Bool("force", false, "apply the plan; without it only print it")
	return func(ctx context.Context, s *Shell, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if *schemeFlag != "" {
			if _, err := erasure.ParseScheme(*schemeFlag); err != nil {
				return fmt.Errorf("%w: %w", ErrUsage, err)
			}
		}
		v, err := s.planView(ctx, *force)
		if err != nil {
			return err
		}
		ec := v.ecShards()
		limit := float64(v.resp.GetVolumeSizeLimit())
		now := time.Now()
		var chosen []uint32
		for _, vid := range v.volumeIDs() {
			info := v.anyCopy(vid)
			if (*id != 0 && vid != uint32(*id)) || (*collection != "" && info.GetCollection() != *collection) {
				continue
			}
			if holders, done := ec[vid]; done {
				// An encode interrupted before it deleted the original
				// copies: those are read-only and complete, the shards may
				// not be. They are removed and the volume encoded again.
				fmt.Fprintf(s.out, "volume %d: has shards of an interrupted encode on %s; they will be removed and the volume encoded again\n",
					vid, strings.Join(slices.Sorted(maps.Keys(holders)), ", "))
			}
			size, modified := uint64(0), int64(0)
			for _, c := range v.copies[vid] {
				size = max(size, c.GetSize())
				modified = max(modified, int64(c.GetModifiedAtUnix()))
			}
			if *id == 0 && limit > 0 && float64(size) < limit**fullPercent/100 {
				continue
			}
			if quiet := now.Sub(time.Unix(modified, 0)); modified != 0 && quiet < *quietFor {
				if *id != 0 {
					return fmt.Errorf("%w: volume %d was written %v ago (less than -quietFor=%v): it may still be written to", ErrUsage, vid, quiet.Round(time.Second), *quietFor)
				}
				continue
			}
			chosen = append(chosen, vid)
		}
		if *id != 0 && len(chosen) == 0 {
			return fmt.Errorf("%w: volume %d is not on any live server, or already erasure-coded", ErrNotFound, *id)
		}
		if len(chosen) == 0 {
			fmt.Fprintln(s.out, "no volume to encode")
			return nil
		}
		load := shardLoad(ec)
		leftovers := map[uint32][]string{}
		for _, vid := range chosen {
			for url, e := range ec[vid] {
				leftovers[vid] = append(leftovers[vid], url)
				load[url] -= erasure.ShardSet(e.GetShards()).Count()
			}
		}
		plans := map[uint32]map[string]erasure.ShardSet{}
		schemes := map[uint32]erasure.Scheme{}
		fmt.Fprintf(s.out, "plan: encode %d volumes\n", len(chosen))
		for _, vid := range chosen {
			scheme, err := v.ecSchemeFor(v.anyCopy(vid).GetCollection(), *schemeFlag)
			if err != nil {
				return err
			}
			schemes[vid] = scheme
			p := topology.NewShardPlacer(v.snapshot(), load)
			place := map[string]erasure.ShardSet{}
			for i := range scheme.Total() {
				url, err := p.Next()
				if err != nil {
					return err
				}
				place[url] = place[url].With(i)
				load[url]++
			}
			plans[vid] = place
			info := v.anyCopy(vid)
			fmt.Fprintf(s.out, "  volume %d  collection %q  size %s  files %d  copies on %s  as %s\n", vid, info.GetCollection(),
				bytesString(info.GetSize()), info.GetFileCount(), strings.Join(v.holders(vid), ", "), scheme)
			for _, url := range slices.Sorted(maps.Keys(place)) {
				dc := v.dcOf[url]
				fmt.Fprintf(s.out, "    shards %-12s -> %s (%s/%s)\n", place[url], url, dc[0], dc[1])
			}
		}
		if !*force {
			fmt.Fprintln(s.out, "dry run: run again with -force to apply (the original copies are deleted once every shard is verified)")
			return nil
		}
		var errs []error
		s.track.plan("volumes", len(chosen))
		for i, vid := range chosen {
			if err := s.requireLock(); err != nil {
				return err
			}
			fmt.Fprintf(s.out, "[%d/%d] encode volume %d\n", i+1, len(chosen), vid)
			err := s.removeShards(ctx, v, vid, leftovers[vid])
			if err == nil {
				err = s.encodeVolume(ctx, v, vid, schemes[vid], plans[vid])
			}
			s.track.done(1, err != nil)
			if err != nil {
				fmt.Fprintf(s.out, "  failed: %v\n", err)
				errs = append(errs, err)
				if ctx.Err() != nil {
					break
				}
				continue
			}
			fmt.Fprintln(s.out, "  done")
		}
		return errors.Join(errs...)
	}
}

// encodeVolume runs one encode: every copy read-only; shards written on one
// copy's server; shards copied to their holders, each verified there;
// the master shown every shard; only then the original copies deleted.
// Any failure before that point removes the shards again and restores the
// copies' writability, so the volume is as it was.
func (s *Shell) encodeVolume(ctx context.Context, v *view, vid uint32, scheme erasure.Scheme, place map[string]erasure.ShardSet) (err error) {
	holders := v.holders(vid)
	source := holders[0]
	collection := v.anyCopy(vid).GetCollection()
	var writable []string
	placed := map[string]bool{}
	committed := false
	defer func() {
		if committed {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		for url := range placed {
			if vc, cerr := s.volumeClient(v, url); cerr == nil {
				vc.EcUnmount(cctx, &volumepb.EcShardsRequest{VolumeId: vid, Collection: collection, ShardIds: allShards(scheme)})
			}
		}
		for _, u := range writable {
			if merr := s.markVolume(cctx, v, vid, u, false); merr != nil {
				err = errors.Join(err, merr)
			}
		}
	}()
	for _, u := range holders {
		// Marked even when the master's view says read-only: that view may
		// be a full volume's, or older than the copy's state, and the encode
		// refuses a copy that still takes writes.
		if err := s.markVolume(ctx, v, vid, u, true); err != nil {
			return err
		}
		if !v.copies[vid][u].GetReadOnly() {
			writable = append(writable, u) // made writable again if the encode fails
		}
	}
	sc, err := s.volumeClient(v, source)
	if err != nil {
		return err
	}
	placed[source] = true
	stream, err := sc.EcEncode(ctx, &volumepb.EcEncodeRequest{VolumeId: vid, Scheme: scheme.String()})
	if err != nil {
		return fmt.Errorf("shell: encode volume %d on %s: %w", vid, source, err)
	}
	if err := s.followEC(stream.Recv, fmt.Sprintf("encode volume %d on %s", vid, source)); err != nil {
		return fmt.Errorf("shell: encode volume %d on %s: %w", vid, source, err)
	}
	srcAddr, err := v.grpcAddr(source)
	if err != nil {
		return err
	}
	for _, url := range slices.Sorted(maps.Keys(place)) {
		if url == source {
			continue
		}
		tc, err := s.volumeClient(v, url)
		if err != nil {
			return err
		}
		placed[url] = true
		fmt.Fprintf(s.out, "  copy shards %s to %s\n", place[url], url)
		cs, err := tc.EcCopy(ctx, &volumepb.EcCopyRequest{VolumeId: vid, Collection: collection, ShardIds: shardIDList(place[url]), SourceGrpcAddr: srcAddr})
		if err == nil {
			err = s.followEC(cs.Recv, "")
		}
		if err != nil {
			return fmt.Errorf("shell: copy shards %s of volume %d to %s: %w", place[url], vid, url, err)
		}
	}
	keep := place[source]
	drop := erasure.ShardSet(1<<scheme.Total()-1) &^ keep
	if _, err := sc.EcUnmount(ctx, &volumepb.EcShardsRequest{VolumeId: vid, Collection: collection, ShardIds: shardIDList(drop)}); err != nil {
		return fmt.Errorf("shell: drop copied shards of volume %d from %s: %w", vid, source, err)
	}
	if keep != 0 {
		if _, err := sc.EcVerify(ctx, &volumepb.EcShardsRequest{VolumeId: vid, ShardIds: shardIDList(keep)}); err != nil {
			return fmt.Errorf("shell: verify shards of volume %d on %s: %w", vid, source, err)
		}
	}
	if err := s.waitECShards(ctx, vid, scheme.Total()); err != nil {
		return err
	}
	committed = true
	for _, u := range holders {
		if err := s.deleteCopy(ctx, v, vid, u); err != nil {
			return fmt.Errorf("shell: every shard of volume %d is in place, but deleting the original copy failed (run ec.encode again or delete it with volume.delete): %w", vid, err)
		}
	}
	return nil
}

// ecSchemeFor is the scheme to encode a volume of collection with: the
// flag's, else the collection's setting, else the cluster's, else 10+4.
func (v *view) ecSchemeFor(collection, flagValue string) (erasure.Scheme, error) {
	set := v.resp.GetEcScheme()
	text := flagValue
	if text == "" {
		text = set[collection]
	}
	if text == "" {
		text = set[""]
	}
	if text == "" {
		return erasure.DefaultScheme, nil
	}
	return erasure.ParseScheme(text)
}

// removeShards unmounts and deletes every shard of volume vid on the given
// servers (leftovers of an interrupted encode).
func (s *Shell) removeShards(ctx context.Context, v *view, vid uint32, urls []string) error {
	for _, url := range urls {
		vc, err := s.volumeClient(v, url)
		if err == nil {
			_, err = vc.EcUnmount(ctx, &volumepb.EcShardsRequest{VolumeId: vid, ShardIds: shardIDList(erasure.ShardSet(1<<erasure.MaxShards - 1))})
		}
		if err != nil {
			return fmt.Errorf("shell: remove leftover shards of volume %d on %s: %w", vid, url, err)
		}
	}
	return nil
}

func allShards(s erasure.Scheme) []uint32 { return shardIDList(erasure.ShardSet(1<<s.Total() - 1)) }

func shardIDList(s erasure.ShardSet) []uint32 {
	var out []uint32
	for _, i := range s.List() {
		out = append(out, uint32(i))
	}
	return out
}

// followEC reads a progress stream to its end, showing progress when desc is set.
func (s *Shell) followEC(recv func() (*volumepb.EcProgress, error), desc string) error {
	p := s.newProgress(desc)
	defer p.finish()
	for {
		msg, err := recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if msg.GetTotal() > 0 {
			p.update(msg.GetDone(), msg.GetTotal())
		}
	}
}

// waitECShards waits until the master's topology shows want distinct shards
// of volume vid (the holders' heartbeats carried them).
func (s *Shell) waitECShards(ctx context.Context, vid uint32, want int) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		v, err := s.fetchView(ctx)
		if err == nil {
			var all erasure.ShardSet
			for _, e := range v.ecShards()[vid] {
				all |= erasure.ShardSet(e.GetShards())
			}
			if all.Count() >= want {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("shell: the master does not show all %d shards of volume %d: %w", want, vid, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ecState is one EC volume as the topology shows it.
type ecState struct {
	id         uint32
	collection string
	scheme     erasure.Scheme
	holders    map[string]erasure.ShardSet
	present    erasure.ShardSet
	down       []string // holders the master still lists that did not answer (probeECHolders)
}

// ecProbeTimeout bounds the liveness probe of one shard holder.
const ecProbeTimeout = 3 * time.Second

// probeECHolders asks every holder which shards of each volume it serves
// (EcVerify of no shard): a holder the master still lists but that does not
// answer (killed moments ago) is dropped, its shards counted as missing, and
// the answers replace the heartbeats' word.
func (s *Shell) probeECHolders(ctx context.Context, v *view, states []ecState) []ecState {
	alive := map[string]bool{}
	for i := range states {
		st := &states[i]
		st.present = 0
		for _, url := range slices.Sorted(maps.Keys(st.holders)) {
			ok, seen := alive[url]
			var have erasure.ShardSet
			if !seen || ok {
				pctx, cancel := context.WithTimeout(ctx, ecProbeTimeout)
				vc, err := s.volumeClient(v, url)
				var resp *volumepb.EcShardsResponse
				if err == nil {
					resp, err = vc.EcVerify(pctx, &volumepb.EcShardsRequest{VolumeId: st.id})
				}
				cancel()
				switch {
				case err == nil:
					alive[url] = true
					for _, i := range resp.GetShardIds() {
						have = have.With(int(i))
					}
				case status.Code(err) == codes.NotFound:
					alive[url] = true // up, but holds no part of this volume any more
				default:
					alive[url] = false
				}
			}
			if !alive[url] {
				st.down = append(st.down, url)
				delete(st.holders, url)
				continue
			}
			if have == 0 {
				delete(st.holders, url)
				continue
			}
			st.holders[url] = have
			st.present |= have
		}
	}
	return states
}

func (v *view) ecStates(collection string) []ecState {
	var out []ecState
	ec := v.ecShards()
	for _, vid := range slices.Sorted(maps.Keys(ec)) {
		st := ecState{id: vid, holders: map[string]erasure.ShardSet{}}
		for url, e := range ec[vid] {
			st.collection = e.GetCollection()
			st.scheme, _ = erasure.ParseScheme(e.GetScheme())
			st.holders[url] = erasure.ShardSet(e.GetShards())
			st.present |= erasure.ShardSet(e.GetShards())
		}
		if collection != "" && st.collection != collection {
			continue
		}
		out = append(out, st)
	}
	return out
}

func (st ecState) missing() erasure.ShardSet {
	return erasure.ShardSet(1<<st.scheme.Total()-1) &^ st.present
}

func (s *Shell) holderList(v *view, st ecState) []*volumepb.EcShardHolder {
	var out []*volumepb.EcShardHolder
	for _, url := range slices.Sorted(maps.Keys(st.holders)) {
		addr, _ := v.grpcAddr(url)
		out = append(out, &volumepb.EcShardHolder{Url: url, ShardIds: shardIDList(st.holders[url]), GrpcAddr: addr})
	}
	return out
}

func setupECRebuild(fs *flag.FlagSet) runFunc {
	collection := fs.String("collection", "", "only volumes of this collection")
	id := fs.Uint("volumeId", 0, "only this volume")
	force := fs.Bool("force", false, "apply the plan; without it only print it")
	filer := fs.String("filer", "", "a filer (host:port, its HTTP port, or host:port.grpcPort) whose tree is walked to name the files of volumes with fewer than k shards")
	scanLimit := fs.Int("filerScanLimit", 1000000, "stop the filer walk of -filer after this many entries")
	return func(ctx context.Context, s *Shell, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		filerGRPC := ""
		if *filer != "" {
			// host:port (gRPC at port+10000) or host:port.grpcPort, as for masters.
			a, err := parseMaster(*filer)
			if err != nil {
				return fmt.Errorf("%w: -filer %q: want host:port or host:port.grpcPort", ErrUsage, *filer)
			}
			filerGRPC = a.grpc
		}
		if *scanLimit <= 0 {
			return fmt.Errorf("%w: -filerScanLimit must be positive", ErrUsage)
		}
		v, err := s.planView(ctx, *force)
		if err != nil {
			return err
		}
		load := shardLoad(v.ecShards())
		type job struct {
			st     ecState
			target map[string]erasure.ShardSet
		}
		var jobs []job
		var lost []string
		lostKeysOf := map[uint32]map[uint64]bool{} // volume -> needles lost
		states := v.ecStates(*collection)
		if *id != 0 {
			states = slices.DeleteFunc(states, func(st ecState) bool { return st.id != uint32(*id) })
			if len(states) == 0 {
				return fmt.Errorf("%w: no EC volume %d on a live server", ErrNotFound, *id)
			}
		}
		states = s.probeECHolders(ctx, v, states)
		dead := map[string]bool{}
		for _, st := range states {
			for _, url := range st.down {
				dead[url] = true
			}
		}
		for url := range dead {
			fmt.Fprintf(s.out, "holder %s does not answer: its shards count as missing\n", url)
		}
		for _, st := range states {
			miss := st.missing()
			if miss == 0 {
				continue
			}
			if st.present.Count() < st.scheme.Data {
				desc, keys := s.describeLost(ctx, v, st)
				lost = append(lost, fmt.Sprintf("volume %d (collection %q): only shards %s of %s are left; %s",
					st.id, st.collection, st.present, st.scheme, desc))
				if len(keys) > 0 {
					lostKeysOf[st.id] = map[uint64]bool{}
					for _, k := range keys {
						lostKeysOf[st.id][k] = true
					}
				}
				continue
			}
			p := topology.NewShardPlacer(v.snapshot(), load)
			for url, sh := range st.holders {
				p.Hold(url, sh.Count())
			}
			for url := range dead {
				p.Exclude(url)
			}
			target := map[string]erasure.ShardSet{}
			for _, i := range miss.List() {
				url, err := p.Next()
				if err != nil {
					return err
				}
				target[url] = target[url].With(i)
				load[url]++
			}
			jobs = append(jobs, job{st, target})
		}
		for _, l := range lost {
			fmt.Fprintln(s.out, "cannot rebuild "+l)
		}
		if len(lostKeysOf) > 0 {
			if filerGRPC == "" {
				fmt.Fprintln(s.out, "  (run with -filer=host:port to name the files through a filer)")
			} else {
				s.printLostFiles(ctx, filerGRPC, lostKeysOf, *scanLimit)
			}
		}
		if *force {
			// A holder that was down missed the deletes made meanwhile.
			if err := s.syncJournals(ctx, v, states); err != nil {
				return err
			}
		}
		if len(jobs) == 0 {
			fmt.Fprintln(s.out, "every EC volume that can be rebuilt has all its shards")
			if len(lost) > 0 {
				return fmt.Errorf("shell: %d EC volumes have fewer than k shards", len(lost))
			}
			return nil
		}
		fmt.Fprintf(s.out, "plan: rebuild shards of %d EC volumes\n", len(jobs))
		for _, j := range jobs {
			for _, url := range slices.Sorted(maps.Keys(j.target)) {
				fmt.Fprintf(s.out, "  volume %d: rebuild shards %s on %s\n", j.st.id, j.target[url], url)
			}
		}
		if !*force {
			fmt.Fprintln(s.out, "dry run: run again with -force to apply")
			return nil
		}
		var errs []error
		shards := 0
		for _, j := range jobs {
			for _, set := range j.target {
				shards += set.Count()
			}
		}
		s.track.plan("shards", shards)
		for n, j := range jobs {
			for _, url := range slices.Sorted(maps.Keys(j.target)) {
				if err := s.requireLock(); err != nil {
					return err
				}
				fmt.Fprintf(s.out, "[%d/%d] volume %d: rebuild shards %s on %s\n", n+1, len(jobs), j.st.id, j.target[url], url)
				vc, err := s.volumeClient(v, url)
				if err == nil {
					var stream volumepb.VolumeServer_EcRebuildClient
					stream, err = vc.EcRebuild(ctx, &volumepb.EcRebuildRequest{VolumeId: j.st.id, Collection: j.st.collection,
						ShardIds: shardIDList(j.target[url]), Holders: s.holderList(v, j.st)})
					if err == nil {
						err = s.followEC(stream.Recv, fmt.Sprintf("volume %d shards %s", j.st.id, j.target[url]))
					}
				}
				if err == nil && j.st.holders[url] == 0 {
					// New to the volume: see catchUpHolder.
					err = s.catchUpHolder(ctx, j.st.id, url)
				}
				s.track.done(j.target[url].Count(), err != nil)
				if err != nil {
					fmt.Fprintf(s.out, "  failed: %v\n", err)
					errs = append(errs, fmt.Errorf("shell: rebuild volume %d on %s: %w", j.st.id, url, err))
					continue
				}
				fmt.Fprintln(s.out, "  done")
			}
		}
		if len(lost) > 0 {
			errs = append(errs, fmt.Errorf("shell: %d EC volumes have fewer than k shards", len(lost)))
		}
		return errors.Join(errs...)
	}
}

// describeLost names the needles of an EC volume with fewer than k shards
// that cannot be read: those whose record touches a lost data shard (the
// others are still read from their shard). It reads the EC index from a holder.
func (s *Shell) describeLost(ctx context.Context, v *view, st ecState) (string, []uint64) {
	var raw bytes.Buffer
	err := errors.New("no holder")
	for _, url := range slices.Sorted(maps.Keys(st.holders)) {
		vc, cerr := s.volumeClient(v, url)
		if cerr != nil {
			continue
		}
		raw.Reset()
		if err = readECFile(ctx, vc, st.id, ".ecx", &raw); err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Sprintf("the files of its lost data shards cannot be read (their list is unavailable: %v)", err), nil
	}
	x, err := erasure.ParseIndex(raw.Bytes())
	if err != nil {
		return fmt.Sprintf("the files of its lost data shards cannot be read (their list is unavailable: %v)", err), nil
	}
	keys := lostKeys(x, st.present)
	var b strings.Builder
	fmt.Fprintf(&b, "%d of its %d files cannot be read until more shards come back (needle keys", len(keys), len(x.Entries))
	for i, k := range keys {
		if i == 20 {
			fmt.Fprintf(&b, " ... and %d more", len(keys)-20)
			break
		}
		fmt.Fprintf(&b, " %x", k)
	}
	b.WriteString(")")
	return b.String(), keys
}

// printLostFiles names, through the filer at grpcAddr, the files using
// the lost needles (see eclostfiles.go).
func (s *Shell) printLostFiles(ctx context.Context, grpcAddr string, lost map[uint32]map[uint64]bool, limit int) {
	cc, err := s.conns.conn(grpcAddr)
	if err != nil {
		fmt.Fprintf(s.out, "  the lost files cannot be named: %v\n", err)
		return
	}
	fmt.Fprintf(s.out, "walking the filer at %s for the files of the lost needles (at most %d entries)\n", grpcAddr, limit)
	var masters []string
	for _, m := range s.conns.masters {
		masters = append(masters, m.http)
	}
	cl, err := client.New(client.Config{Masters: masters, Logger: s.log})
	if err != nil {
		fmt.Fprintf(s.out, "  the lost files cannot be named: %v\n", err)
		return
	}
	paths, unsure, walked, complete, err := lostFiles(ctx, filerpb.NewFilerClient(cc), clusterBlobs{cl}, lost, limit)
	if err != nil {
		fmt.Fprintf(s.out, "  the lost files cannot be named: %v\n", err)
		return
	}
	for _, p := range slices.Sorted(maps.Keys(unsure)) {
		fmt.Fprintf(s.out, "  maybe lost file %s (its manifest could not be read: %v)\n", p, unsure[p])
	}
	for _, vid := range slices.Sorted(maps.Keys(lost)) {
		p := paths[vid]
		fmt.Fprintf(s.out, "volume %d: %d files lost in the filer (%d needles lost)\n", vid, len(p), len(lost[vid]))
		for i, f := range p {
			if i == 1000 {
				fmt.Fprintf(s.out, "  ... and %d more\n", len(p)-1000)
				break
			}
			fmt.Fprintf(s.out, "  lost file %s\n", f)
		}
	}
	if !complete {
		fmt.Fprintf(s.out, "the filer walk stopped after %d entries (-filerScanLimit): more files may be lost\n", walked)
	} else {
		fmt.Fprintf(s.out, "filer walk complete: %d entries; lost needles not named by any file belong to no file of this filer\n", walked)
	}
}

// lostKeys lists the needles whose record touches a data shard not in present.
func lostKeys(x *erasure.Index, present erasure.ShardSet) []uint64 {
	var out []uint64
	for _, e := range x.Entries {
		exts, err := x.Layout.Locate(e.Offset, needle.RecordSize(e.Size))
		if err != nil {
			continue
		}
		for _, ext := range exts {
			if !present.Has(ext.Shard) {
				out = append(out, e.Key)
				break
			}
		}
	}
	return out
}

// readECFile streams one file of an EC volume from a holder into w.
func readECFile(ctx context.Context, vc volumepb.VolumeServerClient, vid uint32, ext string, w io.Writer) error {
	stream, err := vc.ReadVolumeFile(ctx, &volumepb.ReadVolumeFileRequest{VolumeId: vid, Ext: ext})
	if err != nil {
		return err
	}
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		w.Write(msg.GetData())
	}
}

// syncJournals merges the delete journals of every EC volume's holders into
// each of them.
func (s *Shell) syncJournals(ctx context.Context, v *view, states []ecState) error {
	var errs []error
	merged := uint64(0)
	for _, st := range states {
		if len(st.holders) < 2 {
			continue
		}
		holders := s.holderList(v, st)
		for _, url := range slices.Sorted(maps.Keys(st.holders)) {
			vc, err := s.volumeClient(v, url)
			var resp *volumepb.EcSyncJournalResponse
			if err == nil {
				resp, err = vc.EcSyncJournal(ctx, &volumepb.EcSyncJournalRequest{VolumeId: st.id, Holders: holders})
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("shell: merge delete journals of volume %d on %s: %w", st.id, url, err))
				continue
			}
			merged += resp.GetMerged()
		}
	}
	fmt.Fprintf(s.out, "delete journals merged: %d deletes were missing on some holder\n", merged)
	return errors.Join(errs...)
}

func setupECDecode(fs *flag.FlagSet) runFunc {
	id := fs.Uint("volumeId", 0, "the EC volume")
	force := fs.Bool("force", false, "apply the plan; without it only print it")
	return func(ctx context.Context, s *Shell, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if *id == 0 {
			return fmt.Errorf("%w: -volumeId is required", ErrUsage)
		}
		v, err := s.planView(ctx, *force)
		if err != nil {
			return err
		}
		var st *ecState
		for _, x := range v.ecStates("") {
			if x.id == uint32(*id) {
				// A holder the master still lists but that does not
				// answer (killed moments ago) is left out.
				x = s.probeECHolders(ctx, v, []ecState{x})[0]
				st = &x
			}
		}
		if st == nil {
			return fmt.Errorf("%w: no EC volume %d on a live server", ErrNotFound, *id)
		}
		for _, url := range st.down {
			fmt.Fprintf(s.out, "holder %s does not answer: its shards are left out (and stay on it: once it is back, ec.decode -volumeId=%d -force removes them)\n", url, st.id)
		}
		if _, exists := v.copies[st.id]; exists {
			// Shards a decode could not remove (their holder was down), or
			// of an encode interrupted before it deleted the copies: the
			// normal volume is complete, the shards are leftovers.
			fmt.Fprintf(s.out, "plan: volume %d is a normal volume on %s; remove the EC shards left on %s\n", st.id,
				strings.Join(v.holders(st.id), ", "), strings.Join(slices.Sorted(maps.Keys(st.holders)), ", "))
			if !*force {
				fmt.Fprintln(s.out, "dry run: run again with -force to apply")
				return nil
			}
			if err := s.removeShards(ctx, v, st.id, slices.Sorted(maps.Keys(st.holders))); err != nil {
				return err
			}
			fmt.Fprintf(s.out, "volume %d: leftover shards removed\n", st.id)
			return nil
		}
		if st.present.Count() < st.scheme.Data {
			return fmt.Errorf("shell: EC volume %d has only shards %s of %s: fewer than %d, it cannot be decoded", st.id, st.present, st.scheme, st.scheme.Data)
		}
		target := ""
		for _, url := range slices.Sorted(maps.Keys(st.holders)) {
			if target == "" || st.holders[url].Count() > st.holders[target].Count() {
				target = url
			}
		}
		fmt.Fprintf(s.out, "plan: decode EC volume %d (%s, shards %s) into a normal volume on %s, then delete its shards from %d servers\n",
			st.id, st.scheme, st.present, target, len(st.holders))
		if !*force {
			fmt.Fprintln(s.out, "dry run: run again with -force to apply")
			return nil
		}
		return s.decodeVolume(ctx, v, *st, target)
	}
}

// decodeVolume turns EC volume st into a normal volume on target, then
// removes its shards from every holder.
func (s *Shell) decodeVolume(ctx context.Context, v *view, st ecState, target string) error {
	vc, err := s.volumeClient(v, target)
	if err != nil {
		return err
	}
	// A delete that reached other holders but not the target (cut off from
	// the holder that took it) is merged into the target's journal: before
	// the decode, so that its tombstones are in the decoded file, and again
	// right before the switch, for deletes made meanwhile; the target's
	// switch (its shards removed last) applies that journal to the decoded
	// volume.
	mergeInto := func() error {
		if len(st.holders) < 2 {
			return nil
		}
		_, err := vc.EcSyncJournal(ctx, &volumepb.EcSyncJournalRequest{VolumeId: st.id, Holders: s.holderList(v, st)})
		if err != nil {
			return fmt.Errorf("shell: decode volume %d: merge the holders' delete journals on %s: %w", st.id, target, err)
		}
		return nil
	}
	if err := mergeInto(); err != nil {
		return err
	}
	stream, err := vc.EcDecode(ctx, &volumepb.EcDecodeRequest{VolumeId: st.id, Collection: st.collection, Holders: s.holderList(v, st)})
	if err == nil {
		err = s.followEC(stream.Recv, fmt.Sprintf("decode volume %d on %s", st.id, target))
	}
	if err != nil {
		return fmt.Errorf("shell: decode volume %d on %s: %w", st.id, target, err)
	}
	if err := mergeInto(); err != nil {
		return err
	}
	var errs []error
	order := slices.DeleteFunc(slices.Sorted(maps.Keys(st.holders)), func(url string) bool { return url == target })
	for _, url := range append(order, target) {
		hc, err := s.volumeClient(v, url)
		if err == nil {
			_, err = hc.EcUnmount(ctx, &volumepb.EcShardsRequest{VolumeId: st.id, Collection: st.collection, ShardIds: allShards(st.scheme)})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("shell: volume %d is decoded on %s, but removing its shards from %s failed: %w", st.id, target, url, err))
		}
	}
	if len(errs) == 0 {
		fmt.Fprintf(s.out, "volume %d is a normal volume on %s again\n", st.id, target)
	}
	return errors.Join(errs...)
}

func setupECBalance(fs *flag.FlagSet) runFunc {
	collection := fs.String("collection", "", "only volumes of this collection")
	force := fs.Bool("force", false, "apply the plan; without it only print it")
	return func(ctx context.Context, s *Shell, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		v, err := s.planView(ctx, *force)
		if err != nil {
			return err
		}
		type move struct {
			id         uint32
			collection string
			shard      int
			from, to   string
		}
		var moves []move
		load := shardLoad(v.ecShards())
		for _, st := range v.ecStates(*collection) {
			// The ideal spread of this volume's shards, holders kept where
			// they may stay: a node keeps up to what the placer would give it.
			for url, sh := range st.holders {
				load[url] -= sh.Count()
			}
			p := topology.NewShardPlacer(v.snapshot(), load)
			want := map[string]int{}
			for range st.present.Count() {
				url, err := p.Next()
				if err != nil {
					return err
				}
				want[url]++
			}
			var spare []int
			var spareFrom []string
			for _, url := range slices.Sorted(maps.Keys(st.holders)) {
				ids := st.holders[url].List()
				for len(ids) > want[url] {
					spare = append(spare, ids[len(ids)-1])
					spareFrom = append(spareFrom, url)
					ids = ids[:len(ids)-1]
				}
			}
			for _, url := range slices.Sorted(maps.Keys(want)) {
				for n := st.holders[url].Count(); n < want[url] && len(spare) > 0; n++ {
					moves = append(moves, move{st.id, st.collection, spare[0], spareFrom[0], url})
					spare, spareFrom = spare[1:], spareFrom[1:]
				}
			}
			for url, n := range want {
				load[url] += n
			}
		}
		if len(moves) == 0 {
			fmt.Fprintln(s.out, "EC shards are balanced")
			return nil
		}
		fmt.Fprintf(s.out, "plan (%d moves):\n", len(moves))
		for _, m := range moves {
			fmt.Fprintf(s.out, "  move shard %d of volume %d from %s to %s\n", m.shard, m.id, m.from, m.to)
		}
		if !*force {
			fmt.Fprintln(s.out, "dry run: run again with -force to apply")
			return nil
		}
		var errs []error
		s.track.plan("shards", len(moves))
		for i, m := range moves {
			if err := s.requireLock(); err != nil {
				return err
			}
			fmt.Fprintf(s.out, "[%d/%d] move shard %d of volume %d from %s to %s\n", i+1, len(moves), m.shard, m.id, m.from, m.to)
			err := s.moveShard(ctx, v, m.id, m.collection, m.shard, m.from, m.to)
			s.track.done(1, err != nil)
			if err != nil {
				fmt.Fprintf(s.out, "  failed: %v\n", err)
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
}

// moveShard copies a shard to its new holder (verified there) before
// removing it from the old one.
func (s *Shell) moveShard(ctx context.Context, v *view, vid uint32, collection string, shard int, from, to string) error {
	tc, err := s.volumeClient(v, to)
	if err != nil {
		return err
	}
	srcAddr, err := v.grpcAddr(from)
	if err != nil {
		return err
	}
	cs, err := tc.EcCopy(ctx, &volumepb.EcCopyRequest{VolumeId: vid, Collection: collection, ShardIds: []uint32{uint32(shard)}, SourceGrpcAddr: srcAddr})
	if err == nil {
		err = s.followEC(cs.Recv, "")
	}
	if err != nil {
		return fmt.Errorf("shell: copy shard %d of volume %d to %s: %w", shard, vid, to, err)
	}
	if testAfterShardCopy != nil {
		testAfterShardCopy(vid, to)
	}
	if err := s.catchUpHolder(ctx, vid, to); err != nil {
		return err
	}
	fc, err := s.volumeClient(v, from)
	if err == nil {
		_, err = fc.EcUnmount(ctx, &volumepb.EcShardsRequest{VolumeId: vid, Collection: collection, ShardIds: []uint32{uint32(shard)}})
	}
	if err != nil {
		return fmt.Errorf("shell: shard %d of volume %d is on %s now, but removing it from %s failed: %w", shard, vid, to, from, err)
	}
	return nil
}

// testAfterShardCopy, set by tests, runs right after a shard was copied to
// a holder and before the journals are merged into it.
var testAfterShardCopy func(vid uint32, to string)

// catchUpHolder merges into url's journal of EC volume vid the journals of
// the volume's other holders, once the master lists url with shards of vid:
// a shard copied or rebuilt onto a server new to the volume took a live
// holder's journal, and a delete made after that but before the master
// listed the new holder was forwarded to the others only.
func (s *Shell) catchUpHolder(ctx context.Context, vid uint32, url string) error {
	wait, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		v, err := s.fetchView(wait)
		if err == nil {
			for _, st := range v.ecStates("") {
				if st.id != vid || st.holders[url] == 0 {
					continue
				}
				vc, err := s.volumeClient(v, url)
				if err == nil {
					_, err = vc.EcSyncJournal(ctx, &volumepb.EcSyncJournalRequest{VolumeId: vid, Holders: s.holderList(v, st)})
				}
				if err != nil {
					return fmt.Errorf("shell: merge the delete journals of volume %d into %s: %w", vid, url, err)
				}
				return nil
			}
		}
		select {
		case <-wait.Done():
			return fmt.Errorf("shell: the master does not list %s as a holder of volume %d: %w", url, vid, wait.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// RunScriptOn runs script in a new shell against the master at addr, as
// owner, output to out: the master's automatic EC rebuild
// (master.Config.RunShell) runs `ec.rebuild` through it.
func RunScriptOn(ctx context.Context, addr, owner string, out io.Writer, script string) error {
	sh, err := New(Config{Masters: []string{addr}, Out: out, Owner: owner})
	if err != nil {
		return err
	}
	defer sh.Close()
	return sh.RunScript(ctx, strings.NewReader(script))
}

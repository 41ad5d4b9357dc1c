package erasure

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/reedsolomon"
)

var encoders sync.Map // Scheme -> reedsolomon.Encoder

// encoder returns the (shared, concurrency-safe) coder of a scheme.
func encoder(s Scheme) (reedsolomon.Encoder, error) {
	if e, ok := encoders.Load(s); ok {
		return e.(reedsolomon.Encoder), nil
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	e, err := reedsolomon.New(s.Data, s.Parity)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadScheme, err)
	}
	actual, _ := encoders.LoadOrStore(s, e)
	return actual.(reedsolomon.Encoder), nil
}

// Fetcher reads shard ranges for the readers of this package.
type Fetcher interface {
	// Fetch reads [off, off+n) of shard i. With verify the bytes must have
	// been checked against the shard's block checksums (off and n are then
	// whole blocks). It returns an error wrapping ErrShardUnavailable or
	// ErrCorrupt when the shard cannot serve the range; the reader then
	// works around it.
	Fetch(ctx context.Context, shard int, off, n int64, verify bool) ([]byte, error)
}

// BatchFetcher is a Fetcher that can also read the same verified range of
// several shards in one go (one request per server holding some of them);
// Reconstruct uses it when it has it.
type BatchFetcher interface {
	Fetcher
	FetchVerified(ctx context.Context, shards []int, off, n int64) ([][]byte, []error)
}

// IntoFetcher is a Fetcher that can also read the same verified range of
// several shards into buffers the caller owns (dst[j] for shards[j], the
// range's length each); rebuild uses it to reuse its buffers.
type IntoFetcher interface {
	Fetcher
	FetchVerifiedInto(ctx context.Context, shards []int, off int64, dst [][]byte) []error
}

// ReconstructionSink is a Fetcher that wants to see what ReadRange
// reconstructed (whole verified blocks of shard at off), e.g. to cache it:
// an EC volume never changes, so a rebuilt block stays right.
type ReconstructionSink interface {
	Reconstructed(shard int, off int64, b []byte)
}

// UnavailableReporter is a Fetcher that knows which shards cannot be read
// now (no holder, or the holder failed lately). When ReadRange must
// reconstruct a window of a lost data shard for a ReconstructionSink, it
// rebuilds the same window of those data shards as well: it costs the same
// k range reads and some CPU, and the sink has the blocks for the next
// reads of files there.
type UnavailableReporter interface {
	UnavailableShards(ctx context.Context) ShardSet
}

// dataShards is the set of s's data shards.
func dataShards(s Scheme) ShardSet { return ShardSet(1)<<s.Data - 1 }

// ShardPreferrer is a Fetcher that knows which shards are cheapest to read
// (held locally, holders alive); Reconstruct asks it, only when it has to
// reconstruct, before the caller's prefer list.
type ShardPreferrer interface {
	PreferShards(ctx context.Context) []int
}

// FetchFunc adapts a function to Fetcher.
type FetchFunc func(ctx context.Context, shard int, off, n int64, verify bool) ([]byte, error)

// Fetch calls f.
func (f FetchFunc) Fetch(ctx context.Context, shard int, off, n int64, verify bool) ([]byte, error) {
	return f(ctx, shard, off, n, verify)
}

// fetchVerified reads the same verified range of several shards, batched
// when the fetcher can, else one goroutine per shard.
func fetchVerified(ctx context.Context, fetch Fetcher, shards []int, off, n int64) ([][]byte, []error) {
	if b, ok := fetch.(BatchFetcher); ok {
		return b.FetchVerified(ctx, shards, off, n)
	}
	got := make([][]byte, len(shards))
	errs := make([]error, len(shards))
	var wg sync.WaitGroup
	for j, idx := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[j], errs[j] = fetch.Fetch(ctx, idx, off, n, true)
		}()
	}
	wg.Wait()
	return got, errs
}

// Reconstruct returns the bytes [off, off+n) (whole blocks) of each shard in
// want, computed from any k other shards read through fetch. Shards in avoid
// are not read (known bad). Shards are tried in the order of prefer first,
// then by index; failed reads are replaced by other shards until k are in
// hand or none is left (ErrTooFewShards). bad reports the shards whose
// reads failed.
func Reconstruct(ctx context.Context, s Scheme, fetch Fetcher, off, n int64, want, avoid ShardSet, prefer []int) (out map[int][]byte, bad ShardSet, err error) {
	return reconstructInto(ctx, s, fetch, off, n, want, avoid, prefer, nil, nil)
}

// reconstructInto is Reconstruct that, when dst is given, computes each
// shard i of want into dst[i] (n bytes long) instead of new buffers, and,
// when scratch is given (one entry per shard) and fetch is an IntoFetcher,
// reads the other shards into scratch[i] (grown to n when shorter).
func reconstructInto(ctx context.Context, s Scheme, fetch Fetcher, off, n int64, want, avoid ShardSet, prefer []int, dst, scratch [][]byte) (out map[int][]byte, bad ShardSet, err error) {
	enc, err := encoder(s)
	if err != nil {
		return nil, 0, err
	}
	var order []int
	seen := want | avoid
	if p, ok := fetch.(ShardPreferrer); ok {
		prefer = append(p.PreferShards(ctx), prefer...)
	}
	for _, i := range prefer {
		if i >= 0 && i < s.Total() && !seen.Has(i) {
			order = append(order, i)
			seen = seen.With(i)
		}
	}
	for i := range s.Total() {
		if !seen.Has(i) {
			order = append(order, i)
		}
	}
	shards := make([][]byte, s.Total())
	have := 0
	var errs []error
	for have < s.Data {
		need := s.Data - have
		if len(order) < need {
			return nil, bad, fmt.Errorf("%w: %d of %d shards readable (%v)", ErrTooFewShards, have, s.Data, errors.Join(errs...))
		}
		batch := order[:need]
		order = order[need:]
		var got [][]byte
		var gotErr []error
		if into, ok := fetch.(IntoFetcher); ok && scratch != nil {
			got = make([][]byte, len(batch))
			for j, idx := range batch {
				if int64(cap(scratch[idx])) < n {
					scratch[idx] = make([]byte, n)
				}
				got[j] = scratch[idx][:n]
			}
			gotErr = into.FetchVerifiedInto(ctx, batch, off, got)
		} else {
			got, gotErr = fetchVerified(ctx, fetch, batch, off, n)
		}
		for j, idx := range batch {
			if gotErr[j] == nil && int64(len(got[j])) != n {
				gotErr[j] = fmt.Errorf("%w: shard %d returned %d bytes, want %d", ErrCorrupt, idx, len(got[j]), n)
			}
			if gotErr[j] != nil {
				if ctx.Err() != nil {
					return nil, bad, ctx.Err()
				}
				bad = bad.With(idx)
				errs = append(errs, fmt.Errorf("shard %d: %w", idx, gotErr[j]))
				continue
			}
			shards[idx] = got[j]
			have++
		}
	}
	required := make([]bool, s.Total())
	for _, i := range want.List() {
		required[i] = true
		if dst != nil && shards[i] == nil && int64(len(dst[i])) == n {
			shards[i] = dst[i][:0] // ReconstructSome fills it in place
		}
	}
	if err := enc.ReconstructSome(shards, required); err != nil {
		return nil, bad, fmt.Errorf("%w: reconstruct: %v", ErrCorrupt, err)
	}
	out = map[int][]byte{}
	for _, i := range want.List() {
		out[i] = shards[i]
		if dst != nil && int64(len(dst[i])) == n && n > 0 && &dst[i][0] != &shards[i][0] {
			copy(dst[i], shards[i])
		}
	}
	return out, bad, nil
}

// ReadRange reads .dat bytes [off, off+n) through fetch: each piece from
// its data shard (one read per shard touched, unverified: the caller checks
// the needle's own CRC), and a piece whose shard fails, or which lies in a
// shard of avoid, reconstructed from k other shards. bad reports the shards
// that failed.
func ReadRange(ctx context.Context, l Layout, fetch Fetcher, off, n int64, avoid ShardSet, prefer []int) ([]byte, ShardSet, error) {
	exts, err := l.Locate(off, n)
	if err != nil {
		return nil, 0, err
	}
	out := make([]byte, 0, n)
	var bad ShardSet
	for _, e := range exts {
		if !avoid.Has(e.Shard) {
			b, err := fetch.Fetch(ctx, e.Shard, e.Off, e.Len, false)
			if err == nil && int64(len(b)) == e.Len {
				out = append(out, b...)
				continue
			}
			if ctx.Err() != nil {
				return nil, bad, ctx.Err()
			}
			bad = bad.With(e.Shard)
		}
		start, end := reconstructWindow(l, e.Off, e.Len)
		want := SetOf(e.Shard)
		sink, caching := fetch.(ReconstructionSink)
		if u, ok := fetch.(UnavailableReporter); ok && caching {
			// The same k range reads rebuild every other lost data
			// shard's window too, for the reads of the files there.
			extra := u.UnavailableShards(ctx) & dataShards(l.Scheme) &^ want
			if l.Scheme.Total()-(avoid|bad|want|extra).Count() >= l.Scheme.Data {
				want |= extra
			}
		}
		rec, more, err := Reconstruct(ctx, l.Scheme, fetch, start, end-start, want, avoid|bad, prefer)
		bad |= more
		if err != nil {
			return nil, bad, err
		}
		if caching {
			for _, i := range want.List() {
				sink.Reconstructed(i, start, rec[i])
			}
		}
		out = append(out, rec[e.Shard][e.Off-start:e.Off-start+e.Len]...)
	}
	return out, bad, nil
}

// ReconstructWindow is the least a reconstruction of a lost shard's range
// rebuilds: the aligned window of this many bytes around it. Neighbouring
// small needles share it, so with a ReconstructionSink that caches (the
// volume server does) the first degraded read of a window pays for the k
// range reads and the next reads of files in it cost none; a window of 16
// KiB moves k × 16 KiB instead of k × 4-8 KiB for that first read.
const ReconstructWindow = 16 << 10

// reconstructWindow widens [off, off+n) of a shard to whole blocks and at
// least the ReconstructWindow-aligned window around its start, within the
// shard.
func reconstructWindow(l Layout, off, n int64) (start, end int64) {
	start, end = alignBlocks(off, n)
	w := start / ReconstructWindow * ReconstructWindow
	return w, min(max(end, w+ReconstructWindow), l.ShardSize)
}

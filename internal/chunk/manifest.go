package chunk

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"time"
)

const manifestMagic = "KCM1"

// maxManifestDepth bounds Resolve's recursion: Pack only ever makes one
// level, and a loop in corrupt data must not recurse forever.
const maxManifestDepth = 4

// maxManifestBlob bounds the manifest blob Resolve will read.
const maxManifestBlob = 64 << 20

// Pack replaces each run of batch consecutive plain chunks by one manifest
// chunk, when cs has more than threshold plain chunks; otherwise it returns
// cs unchanged. Replacing consecutive chunks in place keeps the list order,
// so shadowing (later wins) is the same after Resolve. Manifests stored are
// returned as the new list's manifest chunks.
func Pack(ctx context.Context, p Putter, cs []Chunk, threshold, batch int) ([]Chunk, error) {
	plain := 0
	for _, c := range cs {
		if !c.Manifest {
			plain++
		}
	}
	if plain <= threshold || batch < 2 {
		return cs, nil
	}
	var out []Chunk
	var run []Chunk
	flush := func(final bool) error {
		for len(run) >= batch || (final && len(run) > 0) {
			if len(run) < batch {
				out = append(out, run...)
				run = nil
				break
			}
			m, err := storeManifest(ctx, p, run[:batch])
			if err != nil {
				return err
			}
			out = append(out, m)
			run = run[batch:]
		}
		return nil
	}
	for _, c := range cs {
		if c.Manifest {
			if err := flush(true); err != nil {
				return nil, err
			}
			out = append(out, c)
			continue
		}
		run = append(run, c)
		if err := flush(false); err != nil {
			return nil, err
		}
	}
	if err := flush(true); err != nil {
		return nil, err
	}
	return out, nil
}

func storeManifest(ctx context.Context, p Putter, cs []Chunk) (Chunk, error) {
	data := AppendList([]byte(manifestMagic), cs)
	// A manifest listing sealed chunks holds their keys: it is sealed too.
	encrypt := false
	for _, c := range cs {
		encrypt = encrypt || c.CipherKey != nil
	}
	fid, key, err := PutChunk(ctx, p, data, encrypt)
	if err != nil {
		return Chunk{}, fmt.Errorf("chunk: store manifest: %w", err)
	}
	lo, hi := cs[0].Offset, cs[0].End()
	for _, c := range cs {
		lo, hi = min(lo, c.Offset), max(hi, c.End())
	}
	sum := md5.Sum(data)
	return Chunk{FID: fid, Offset: lo, Size: hi - lo, Mtime: time.Now().UnixNano(), ETag: hex.EncodeToString(sum[:]), Manifest: true, CipherKey: key}, nil
}

// ReadManifest fetches and decodes the chunk list of manifest chunk m.
func ReadManifest(ctx context.Context, o Opener, m Chunk) ([]Chunk, error) {
	rc, err := OpenChunk(ctx, o, m.FID, m.CipherKey, -1, 0, -1)
	if err != nil {
		return nil, fmt.Errorf("chunk: read manifest %s: %w", m.FID, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxManifestBlob))
	if err != nil {
		return nil, fmt.Errorf("chunk: read manifest %s: %w", m.FID, err)
	}
	if !bytes.HasPrefix(data, []byte(manifestMagic)) {
		return nil, fmt.Errorf("%w: manifest %s has no magic", ErrCorrupt, m.FID)
	}
	cs, _, err := ReadList(data[len(manifestMagic):])
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", m.FID, err)
	}
	return cs, nil
}

// Resolve expands manifest chunks in place, recursively, so that the
// result holds plain chunks only, in shadowing order. Manifests whose span
// does not meet [off, off+n) are dropped unread (n < 0: the whole file):
// their chunks cannot show in that range.
func Resolve(ctx context.Context, o Opener, cs []Chunk, off, n int64) ([]Chunk, error) {
	return resolve(ctx, o, cs, off, n, 0)
}

func resolve(ctx context.Context, o Opener, cs []Chunk, off, n int64, depth int) ([]Chunk, error) {
	hasManifest := false
	for _, c := range cs {
		hasManifest = hasManifest || c.Manifest
	}
	if !hasManifest {
		return cs, nil
	}
	if depth >= maxManifestDepth {
		return nil, fmt.Errorf("%w: manifests nested deeper than %d", ErrCorrupt, maxManifestDepth)
	}
	out := make([]Chunk, 0, len(cs))
	for _, c := range cs {
		if !c.Manifest {
			out = append(out, c)
			continue
		}
		if n >= 0 && (c.End() <= off || c.Offset >= off+n) {
			continue
		}
		sub, err := ReadManifest(ctx, o, c)
		if err != nil {
			return nil, err
		}
		sub, err = resolve(ctx, o, sub, off, n, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, sub...)
	}
	return out, nil
}

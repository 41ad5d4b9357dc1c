// Package chunktest provides an in-memory chunk.Blobs for tests of the
// chunk and filer packages, with counters and fault injection.
//
// Only tests import it.
package chunktest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/kelpfs/kelp/internal/chunk"
)

// Mem is an in-memory blob store. The zero value is not usable: use New.
type Mem struct {
	mu    sync.Mutex
	blobs map[string][]byte
	next  uint64

	// FailPut, when set, is consulted before each Put; a non-nil error fails it.
	FailPut func(n int64) error
	// FailDelete, when set, is consulted before each Delete.
	FailDelete func(fid string) error
	// FailOpen, when set, is consulted before each Open.
	FailOpen func(fid string) error

	Puts, Deletes, Opens  atomic.Int64
	inFlight, MaxInFlight atomic.Int64
}

// New returns an empty store.
func New() *Mem { return &Mem{blobs: make(map[string][]byte)} }

// Put implements chunk.Putter.
func (m *Mem) Put(ctx context.Context, data []byte) (string, error) {
	n := m.Puts.Add(1)
	cur := m.inFlight.Add(1)
	defer m.inFlight.Add(-1)
	for {
		old := m.MaxInFlight.Load()
		if cur <= old || m.MaxInFlight.CompareAndSwap(old, cur) {
			break
		}
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if m.FailPut != nil {
		if err := m.FailPut(n); err != nil {
			return "", err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next++
	fid := fmt.Sprintf("1,%x%08x", m.next, uint32(m.next*2654435761))
	m.blobs[fid] = bytes.Clone(data)
	return fid, nil
}

// Open implements chunk.Opener.
func (m *Mem) Open(ctx context.Context, fid string, off, n int64) (io.ReadCloser, error) {
	m.Opens.Add(1)
	if m.FailOpen != nil {
		if err := m.FailOpen(fid); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	b, ok := m.blobs[fid]
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("chunktest: open %s: %w", fid, chunk.ErrNotFound)
	}
	if off > int64(len(b)) {
		return nil, fmt.Errorf("chunktest: open %s: offset %d past %d", fid, off, len(b))
	}
	end := int64(len(b))
	if n >= 0 {
		end = min(end, off+n)
	}
	return io.NopCloser(bytes.NewReader(b[off:end])), nil
}

// Delete implements chunk.Blobs.
func (m *Mem) Delete(ctx context.Context, fid string) error {
	m.Deletes.Add(1)
	if m.FailDelete != nil {
		if err := m.FailDelete(fid); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.blobs[fid]; !ok {
		return fmt.Errorf("chunktest: delete %s: %w", fid, chunk.ErrNotFound)
	}
	delete(m.blobs, fid)
	return nil
}

// Has reports whether blob fid exists.
func (m *Mem) Has(fid string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.blobs[fid]
	return ok
}

// Live returns the ids of the stored blobs, sorted.
func (m *Mem) Live() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.blobs))
	for k := range m.blobs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

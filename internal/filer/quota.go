package filer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kelpfs/kelp/internal/filer/store"
)

// Directory quotas.
//
// A quota is a limit on the bytes (the sum of file sizes) and the entries
// (files, directories and symlinks) below a directory. Its usage is a
// counter kept in the store next to the limit, under "q" + path, and
// changed in the same transaction as every entry key written or deleted
// below that directory: usage is exact whatever crashes or concurrent
// writers do (transactions are serialisable), survives restarts, and costs
// nothing to read (CSI's NodeGetVolumeStats, S3 bucket usage). The price
// is paid only while some quota exists ("Q" counts them; with none, one
// extra Get per transaction): every entry write then reads the quota keys
// of its ancestors and the entry it replaces, and writes below one quota
// directory serialise on its counter. Computing usage on demand instead
// would cost a walk of the subtree per check, which a write path cannot
// afford.
//
// A change that makes a quota's bytes or entries grow past its limit fails
// with ErrQuotaExceeded and changes nothing; shrinking is always allowed,
// also above the limit (after the limit was lowered), so nothing stored is
// ever lost to a quota. A directory that is or holds a quota directory
// cannot be renamed (ErrInvalid); deleting it drops its quota.

// Quota is a directory's limits and usage. A limit of 0 means unlimited.
type Quota struct {
	Path      string
	MaxBytes  int64
	MaxFiles  int64
	UsedBytes int64
	UsedFiles int64
}

const (
	prefixQuota = 'q'
)

var quotaCountKey = []byte{'Q'}

func quotaKey(dir string) []byte { return append([]byte{prefixQuota}, dir...) }

func encodeQuota(q *Quota) []byte {
	b := make([]byte, 1, 33)
	b[0] = 1
	for _, v := range []int64{q.MaxBytes, q.MaxFiles, q.UsedBytes, q.UsedFiles} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	return b
}

func decodeQuota(dir string, b []byte) (*Quota, error) {
	if len(b) != 33 || b[0] != 1 {
		return nil, fmt.Errorf("%w: quota record of %s", ErrCorrupt, dir)
	}
	v := func(i int) int64 { return int64(binary.BigEndian.Uint64(b[1+8*i:])) }
	return &Quota{Path: dir, MaxBytes: v(0), MaxFiles: v(1), UsedBytes: v(2), UsedFiles: v(3)}, nil
}

// usageOf is what one stored entry counts towards a quota.
func usageOf(v []byte) (bytes, files int64, err error) {
	if v == nil {
		return 0, 0, nil
	}
	e, err := decodeEntry("?", v)
	if err != nil {
		return 0, 0, err
	}
	if e.Mode.IsRegular() {
		return e.Size, 1, nil
	}
	return 0, 1, nil
}

// quotaTx wraps a transaction and keeps the quota counters of every entry
// key written through it; finish applies and checks them before the commit.
type quotaTx struct {
	store.Tx
	checked bool
	active  bool
	recs    map[string]*Quota // quota records read so far; nil value: none at that path
	delta   map[string]*[2]int64
	dropped map[string]bool // quota directories deleted in this transaction
}

func (q *quotaTx) isActive() (bool, error) {
	if q.checked {
		return q.active, nil
	}
	v, err := q.Tx.Get(quotaCountKey)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return false, err
	default:
		q.active = len(v) == 8 && binary.BigEndian.Uint64(v) > 0
	}
	q.checked = true
	return q.active, nil
}

func (q *quotaTx) record(dir string) (*Quota, error) {
	if r, ok := q.recs[dir]; ok {
		return r, nil
	}
	v, err := q.Tx.Get(quotaKey(dir))
	var r *Quota
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, err
	default:
		if r, err = decodeQuota(dir, v); err != nil {
			return nil, err
		}
	}
	if q.recs == nil {
		q.recs = map[string]*Quota{}
	}
	q.recs[dir] = r
	return r, nil
}

// account adds the change of entry key k from its stored value to nv
// (nil: deleted) to the quotas above it.
func (q *quotaTx) account(k, nv []byte) error {
	if len(k) == 0 || k[0] != prefixEntry {
		return nil
	}
	if on, err := q.isActive(); err != nil || !on {
		return err
	}
	p, err := pathOfKey(k)
	if err != nil {
		return err
	}
	old, err := q.Tx.Get(k)
	if errors.Is(err, store.ErrNotFound) {
		old = nil
	} else if err != nil {
		return err
	}
	ob, of, err := usageOf(old)
	if err != nil {
		return err
	}
	nb, nf, err := usageOf(nv)
	if err != nil {
		return err
	}
	if nv == nil && old != nil {
		if r, err := q.record(p); err != nil {
			return err
		} else if r != nil {
			if q.dropped == nil {
				q.dropped = map[string]bool{}
			}
			q.dropped[p] = true
		}
	}
	if nb == ob && nf == of {
		return nil
	}
	for dir := p; dir != "/"; {
		dir, _ = SplitPath(dir)
		if dir == "/" {
			break
		}
		r, err := q.record(dir)
		if err != nil {
			return err
		}
		if r == nil {
			continue
		}
		if q.delta == nil {
			q.delta = map[string]*[2]int64{}
		}
		d := q.delta[dir]
		if d == nil {
			d = new([2]int64)
			q.delta[dir] = d
		}
		d[0] += nb - ob
		d[1] += nf - of
	}
	return nil
}

func (q *quotaTx) Put(k, v []byte) error {
	if err := q.account(k, v); err != nil {
		return err
	}
	return q.Tx.Put(k, v)
}

func (q *quotaTx) Delete(k []byte) error {
	if err := q.account(k, nil); err != nil {
		return err
	}
	return q.Tx.Delete(k)
}

// finish writes the changed counters, refusing growth past a limit, and
// drops the quotas of deleted directories.
func (q *quotaTx) finish() error {
	for dir, d := range q.delta {
		if q.dropped[dir] {
			continue
		}
		r := q.recs[dir]
		nb, nf := max(r.UsedBytes+d[0], 0), max(r.UsedFiles+d[1], 0)
		if d[0] > 0 && r.MaxBytes > 0 && nb > r.MaxBytes {
			return fmt.Errorf("%w: %s: %d bytes used, %d more would pass the limit of %d", ErrQuotaExceeded, dir, r.UsedBytes, d[0], r.MaxBytes)
		}
		if d[1] > 0 && r.MaxFiles > 0 && nf > r.MaxFiles {
			return fmt.Errorf("%w: %s: %d entries used, %d more would pass the limit of %d", ErrQuotaExceeded, dir, r.UsedFiles, d[1], r.MaxFiles)
		}
		r.UsedBytes, r.UsedFiles = nb, nf
		if err := q.Tx.Put(quotaKey(dir), encodeQuota(r)); err != nil {
			return err
		}
	}
	for dir := range q.dropped {
		if err := q.Tx.Delete(quotaKey(dir)); err != nil {
			return err
		}
		if err := addQuotaCount(q.Tx, -1); err != nil {
			return err
		}
	}
	return nil
}

// holdsQuota reports whether directory dir is or contains a quota directory.
func (q *quotaTx) holdsQuota(dir string) (bool, error) {
	if on, err := q.isActive(); err != nil || !on {
		return false, err
	}
	if r, err := q.record(dir); err != nil || r != nil {
		return r != nil, err
	}
	p := quotaKey(dir + "/")
	found := false
	err := q.Tx.Scan(p, store.PrefixEnd(p), 1, func(k, v []byte) error {
		found = true
		return store.ErrStopScan
	})
	return found, err
}

func addQuotaCount(tx store.Tx, d int64) error {
	var n int64
	v, err := tx.Get(quotaCountKey)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return err
	case len(v) == 8:
		n = int64(binary.BigEndian.Uint64(v))
	}
	n = max(n+d, 0)
	return tx.Put(quotaCountKey, binary.BigEndian.AppendUint64(nil, uint64(n)))
}

// quotaDir cleans dir and checks that it names a directory other than the root.
func quotaDir(dir string) (string, error) {
	dir, err := CleanPath(dir)
	if err != nil {
		return "", err
	}
	if dir == "/" {
		return "", fmt.Errorf("%w: the root cannot have a quota", ErrInvalid)
	}
	return dir, nil
}

// SetQuota sets the limits of directory dir (0: unlimited), creating its
// quota if it has none; the usage is then counted from what dir holds now.
// A limit below the usage is allowed: growth is refused from then on.
func (f *Filer) SetQuota(ctx context.Context, dir string, maxBytes, maxFiles int64) (*Quota, error) {
	dir, err := quotaDir(dir)
	if err != nil {
		return nil, err
	}
	if maxBytes < 0 || maxFiles < 0 {
		return nil, fmt.Errorf("%w: negative quota", ErrInvalid)
	}
	var out *Quota
	err = f.update(ctx, func(t *txn) error {
		e, err := t.get(dir)
		if err != nil {
			return err
		}
		if !e.IsDir() {
			return fmt.Errorf("%w: %s", ErrNotDir, dir)
		}
		r, err := t.q.record(dir)
		if err != nil {
			return err
		}
		if r == nil {
			r = &Quota{Path: dir}
			if err := addQuotaCount(t.q.Tx, 1); err != nil {
				return err
			}
			// Count what is there now, once.
			err := walkTree(t.q.Tx, dir, func(k, v []byte) error {
				b, n, err := usageOf(v)
				r.UsedBytes += b
				r.UsedFiles += n
				return err
			})
			if err != nil {
				return err
			}
		}
		nr := *r
		nr.MaxBytes, nr.MaxFiles = maxBytes, maxFiles
		out = &nr
		return t.q.Tx.Put(quotaKey(dir), encodeQuota(&nr))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RemoveQuota drops the quota of dir; ErrNotFound when it has none.
func (f *Filer) RemoveQuota(ctx context.Context, dir string) error {
	dir, err := quotaDir(dir)
	if err != nil {
		return err
	}
	return f.update(ctx, func(t *txn) error {
		r, err := t.q.record(dir)
		if err != nil {
			return err
		}
		if r == nil {
			return fmt.Errorf("%w: no quota on %s", ErrNotFound, dir)
		}
		if err := t.q.Tx.Delete(quotaKey(dir)); err != nil {
			return err
		}
		return addQuotaCount(t.q.Tx, -1)
	})
}

// GetQuota returns the quota of dir, or ErrNotFound when it has none.
func (f *Filer) GetQuota(ctx context.Context, dir string) (*Quota, error) {
	dir, err := quotaDir(dir)
	if err != nil {
		return nil, err
	}
	v, err := f.st.Get(ctx, quotaKey(dir))
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: no quota on %s", ErrNotFound, dir)
	}
	if err != nil {
		return nil, storeErr(err)
	}
	return decodeQuota(dir, v)
}

// ListQuotas returns every quota at or below dir, in path order.
func (f *Filer) ListQuotas(ctx context.Context, dir string) ([]*Quota, error) {
	dir, err := CleanPath(dir)
	if err != nil {
		return nil, err
	}
	var out []*Quota
	p := quotaKey(dir)
	err = f.st.Scan(ctx, p, store.PrefixEnd(p), 0, func(k, v []byte) error {
		path := string(k[1:])
		if path != dir && !IsAncestor(dir, path) {
			return nil
		}
		r, err := decodeQuota(path, v)
		if err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, storeErr(err)
	}
	return out, nil
}

// quotaOf returns the nearest quota at or above p, or nil.
func (f *Filer) quotaOf(ctx context.Context, p string) (*Quota, error) {
	for dir := p; dir != "/"; dir, _ = SplitPath(dir) {
		q, err := f.GetQuota(ctx, dir)
		if err == nil {
			return q, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return nil, err
		}
	}
	return nil, nil
}

// NearestQuota returns the quota of p or of its nearest ancestor that has
// one, or nil when none does.
func (f *Filer) NearestQuota(ctx context.Context, p string) (*Quota, error) {
	p, err := CleanPath(p)
	if err != nil {
		return nil, err
	}
	return f.quotaOf(ctx, p)
}

// precheckQuota fails early, before any upload, when a whole-file write of
// size bytes at p would certainly pass a quota above it. The commit checks
// again (this read is not in its transaction); size <= 0 checks nothing.
func (f *Filer) precheckQuota(ctx context.Context, p string, size int64) error {
	if size <= 0 {
		return nil
	}
	v, err := f.st.Get(ctx, quotaCountKey)
	if errors.Is(err, store.ErrNotFound) || err == nil && (len(v) != 8 || binary.BigEndian.Uint64(v) == 0) {
		return nil
	}
	if err != nil {
		return storeErr(err)
	}
	var old int64
	if e, err := f.FindEntry(ctx, p); err == nil && e.Mode.IsRegular() {
		old = e.Size
	}
	for dir, _ := SplitPath(p); dir != "/"; dir, _ = SplitPath(dir) {
		q, err := f.GetQuota(ctx, dir)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if q.MaxBytes > 0 && size > old && q.UsedBytes+size-old > q.MaxBytes {
			return fmt.Errorf("%w: %s: %d bytes used, %d more would pass the limit of %d", ErrQuotaExceeded, dir, q.UsedBytes, size-old, q.MaxBytes)
		}
	}
	return nil
}

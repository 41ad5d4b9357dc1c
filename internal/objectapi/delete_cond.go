package objectapi

import (
	"context"
	"errors"

	"github.com/kelpfs/kelp/internal/filer"
)

// removeObjectIf is removeObject when check (nil: none) accepts the
// current entry. A file is checked and deleted in one transaction; a
// directory object, which is changed in place rather than deleted when
// other keys live below it, is checked just before.
func (l *Layer) removeObjectIf(ctx context.Context, bucket, key string, check func(*filer.Entry) error) error {
	if check == nil {
		return l.removeObject(ctx, bucket, key)
	}
	p, dirKey, err := l.objectPath(bucket, key)
	if err != nil {
		return err
	}
	if dirKey {
		cur, err := l.ns.FindEntry(ctx, p)
		if err != nil && !errors.Is(err, filer.ErrNotFound) && !errors.Is(err, filer.ErrNotDir) {
			return err
		}
		if err := check(cur); err != nil {
			return err
		}
		return l.removeObject(ctx, bucket, key)
	}
	removed := false
	err = l.ns.Atomically(ctx, func(tx filer.Batch) error {
		removed = false
		cur, err := tx.Find(p)
		if err != nil && !errors.Is(err, filer.ErrNotFound) && !errors.Is(err, filer.ErrNotDir) {
			return err
		}
		if err := check(cur); err != nil {
			return err
		}
		if currentVersion(key, cur) == nil {
			return nil // nothing to delete: S3 answers 204
		}
		removed = true
		return tx.Delete(p, false)
	})
	if err != nil {
		return err
	}
	if removed {
		l.pruneParents(ctx, bucket, p)
	}
	return nil
}

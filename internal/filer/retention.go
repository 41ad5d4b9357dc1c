package filer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/kelpfs/kelp/internal/filer/store"
)

// The metadata log would grow forever: every change adds an event holding
// the entry before and after it. Events older than Config.EventRetention are
// deleted, oldest first, and the highest deleted sequence number is kept
// under trimKey, so that a subscriber asking to resume from before it learns
// that it missed events (ErrEventsTrimmed) instead of silently skipping them.

var trimKey = []byte{'t'}

// trimBatch is how many events one trimming transaction deletes.
const trimBatch = 512

// trimInterval is how often the background worker trims.
const trimInterval = 10 * time.Minute

// TrimEvents deletes the events logged before the given time, oldest first,
// stopping at the first newer one (events of filers with skewed clocks are
// not deleted out of order), and returns how many it deleted. The background
// worker calls it when Config.EventRetention is set; tools may too.
func (f *Filer) TrimEvents(ctx context.Context, before time.Time) (int, error) {
	total := 0
	for {
		var keys [][]byte
		var last uint64
		newer := false
		start := []byte{prefixEvent}
		err := f.st.Scan(ctx, start, store.PrefixEnd(start), trimBatch, func(k, v []byte) error {
			t, err := eventTime(v)
			if err != nil {
				return err
			}
			if !t.Before(before) {
				newer = true
				return store.ErrStopScan
			}
			if last, err = store.SeqOf(k); err != nil {
				return err
			}
			keys = append(keys, bytes.Clone(k))
			return nil
		})
		if err != nil || len(keys) == 0 {
			return total, storeErr(err)
		}
		err = f.st.Update(ctx, func(tx store.Tx) error {
			trimmed, err := readTrimmed(tx)
			if err != nil {
				return err
			}
			if last > trimmed {
				if err := tx.Put(trimKey, binary.BigEndian.AppendUint64(nil, last)); err != nil {
					return err
				}
			}
			for _, k := range keys {
				if err := tx.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return total, storeErr(err)
		}
		total += len(keys)
		if newer || len(keys) < trimBatch {
			return total, nil
		}
	}
}

// readTrimmed returns the highest deleted sequence number (0: none).
func readTrimmed(r store.ReadTx) (uint64, error) {
	v, err := r.Get(trimKey)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: trim mark of %d bytes", ErrCorrupt, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// checkTrimmed fails with ErrEventsTrimmed when the events after since
// start with deleted ones; it returns where reading should resume: since, or
// for since 0 ("from the beginning") just after the deleted events.
func (f *Filer) checkTrimmed(ctx context.Context, since uint64) (uint64, error) {
	var trimmed uint64
	err := f.st.View(ctx, func(r store.ReadTx) error {
		var err error
		trimmed, err = readTrimmed(r)
		return err
	})
	if err != nil {
		return 0, storeErr(err)
	}
	if since == 0 {
		return trimmed, nil
	}
	if since >= trimmed {
		return since, nil
	}
	return 0, fmt.Errorf("%w: events up to %d were deleted after the retention period; "+
		"resume from %d or later (after re-reading the namespace)", ErrEventsTrimmed, trimmed, trimmed)
}

// eventTime decodes only the time of an encoded event.
func eventTime(b []byte) (time.Time, error) {
	if len(b) < 3 || b[0] != eventVersion {
		return time.Time{}, fmt.Errorf("%w: event: unknown version", ErrCorrupt)
	}
	ns, n := binary.Varint(b[2:])
	if n <= 0 {
		return time.Time{}, fmt.Errorf("%w: event time", ErrCorrupt)
	}
	return fromNano(ns), nil
}

func (f *Filer) retentionLoop(ctx context.Context) {
	tick := time.NewTicker(trimInterval)
	defer tick.Stop()
	for {
		n, err := f.TrimEvents(ctx, f.now().Add(-f.cfg.EventRetention))
		switch {
		case err != nil && ctx.Err() == nil:
			f.log.Warn("filer: trimming the event log", "err", err)
		case n > 0:
			f.log.Info("filer: trimmed the event log", "events", n, "retention", f.cfg.EventRetention)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

package filer

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/kelpfs/kelp/internal/filer/store"
)

// LastSeq is the sequence number of the newest event (0: none yet).
func (f *Filer) LastSeq(ctx context.Context) (uint64, error) {
	v, err := f.st.Get(ctx, seqKey)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, storeErr(err)
	}
	if len(v) != 8 {
		return 0, ErrCorrupt
	}
	return binary.BigEndian.Uint64(v), nil
}

// ReadEvents returns up to limit events with sequence numbers after since,
// in order, stopping early at a gap (an event not yet visible). Events
// deleted after the retention period fail with ErrEventsTrimmed, except for
// since 0, which reads from the oldest event kept.
func (f *Filer) ReadEvents(ctx context.Context, since uint64, limit int) ([]*Event, error) {
	out, err := f.scanEvents(ctx, since, limit)
	if err != nil || len(out) > 0 {
		return out, err
	}
	from, err := f.checkTrimmed(ctx, since)
	if err != nil || from == since {
		return nil, err
	}
	return f.scanEvents(ctx, from, limit)
}

func (f *Filer) scanEvents(ctx context.Context, since uint64, limit int) ([]*Event, error) {
	prefix := []byte{prefixEvent}
	var out []*Event
	next := since + 1
	err := f.st.Scan(ctx, store.SeqKey(prefix, next), store.PrefixEnd(prefix), limit, func(k, v []byte) error {
		seq, err := store.SeqOf(k)
		if err != nil {
			return err
		}
		if seq != next {
			return store.ErrStopScan
		}
		ev, err := decodeEvent(seq, v)
		if err != nil {
			return err
		}
		out = append(out, ev)
		next++
		return nil
	})
	if err == nil && len(out) > 0 {
		// An event may belong to a commit that is visible but not durable
		// yet. Handed out and then lost in a power cut, its sequence number
		// would be given to another change, which a subscriber resuming
		// after the lost one would never see. Unhurried: a deferred
		// commit's event waits for the WAL sync it shares with the commits
		// around it (milliseconds), rather than forcing one per event read,
		// which would make deferring pointless while anyone subscribes.
		err = f.durableUnhurried(ctx)
	}
	if err != nil {
		return nil, storeErr(err)
	}
	return out, nil
}

// Subscribe calls fn with every event whose sequence number is greater
// than since, in order without gaps, then waits for new ones (woken by this
// filer's commits, polling every Config.PollInterval for other filers')
// until ctx ends or fn fails. It returns fn's error, or ctx's. The log is
// persistent: a subscriber that remembers the last Seq it saw resumes from
// it after any restart.
func (f *Filer) Subscribe(ctx context.Context, since uint64, fn func(*Event) error) error {
	const page = 256
	for {
		wake := f.changedChan() // taken before reading, so no commit is missed
		evs, err := f.ReadEvents(ctx, since, page)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if err := fn(ev); err != nil {
				return err
			}
			since = ev.Seq
		}
		if len(evs) == page {
			continue
		}
		t := time.NewTimer(f.cfg.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

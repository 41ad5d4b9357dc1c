package filer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// Trimming deletes the events older than the cut-off, oldest first; a
// subscriber resuming from a deleted event is told so, one resuming from a
// kept one (or from 0) reads on without a gap.
func TestTrimEventsKeepsTheLogContiguous(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	e := newEnv(t, Config{Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	ctx := context.Background()
	// 1,200 events, one second apart: more than two trimming batches.
	for i := range 1200 {
		e.write(t, fmt.Sprintf("/f%d", i), []byte("x"))
		clock.Add(int64(time.Second))
	}
	last, err := e.f.LastSeq(ctx)
	if err != nil || last < 1200 {
		t.Fatalf("last seq %d: %v", last, err)
	}
	first, _ := e.f.ReadEvents(ctx, 0, 1)
	cut := first[0].Time.Add(1100 * time.Second) // keeps the last ~100 events
	n, err := e.f.TrimEvents(ctx, cut)
	if err != nil || n < 1000 {
		t.Fatalf("trimmed %d: %v", n, err)
	}
	kept, err := e.f.ReadEvents(ctx, 0, 10000)
	if err != nil || len(kept) == 0 || kept[len(kept)-1].Seq != last || kept[0].Time.Before(cut) {
		t.Fatalf("after trimming: %d events (%v), first %v", len(kept), err, kept[0].Time)
	}
	oldest := kept[0].Seq
	if int(oldest-1) != n+int(first[0].Seq-1) {
		t.Fatalf("oldest kept %d after trimming %d from %d", oldest, n, first[0].Seq)
	}
	if _, err := e.f.ReadEvents(ctx, oldest-2, 10); !errors.Is(err, ErrEventsTrimmed) {
		t.Fatalf("resuming before the cut: %v", err)
	}
	if evs, err := e.f.ReadEvents(ctx, oldest-1, 10); err != nil || len(evs) != 10 || evs[0].Seq != oldest {
		t.Fatalf("resuming at the cut: %d events, %v", len(evs), err)
	}
	// Subscribe reports the loss too.
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := e.f.Subscribe(sctx, 1, func(*Event) error { return nil }); !errors.Is(err, ErrEventsTrimmed) {
		t.Fatalf("subscribe from a trimmed event: %v", err)
	}
	// Trimming again with the same cut-off deletes nothing; trimming
	// everything leaves the sequence going on from where it was.
	if n, err := e.f.TrimEvents(ctx, cut); n != 0 || err != nil {
		t.Fatalf("second trim: %d %v", n, err)
	}
	if _, err := e.f.TrimEvents(ctx, time.Unix(0, clock.Load()).Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if evs, err := e.f.ReadEvents(ctx, last, 10); err != nil || len(evs) != 0 {
		t.Fatalf("caught-up subscriber after a full trim: %v %v", evs, err)
	}
	e.write(t, "/after", []byte("y"))
	if evs, err := e.f.ReadEvents(ctx, last, 10); err != nil || len(evs) != 1 || evs[0].Seq != last+1 {
		t.Fatalf("event after a full trim: %v %v", evs, err)
	}
}

// With Config.EventRetention the background worker trims on its own.
func TestEventRetentionRunsInTheBackground(t *testing.T) {
	start := time.Now()
	var offset atomic.Int64
	now := func() time.Time { return start.Add(time.Duration(offset.Load())) }
	e := newEnv(t, Config{Now: now})
	e.write(t, "/old", []byte("x"))
	offset.Store(int64(48 * time.Hour))
	e.restart(t, Config{Now: now, EventRetention: 24 * time.Hour})
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs, err := e.f.ReadEvents(context.Background(), 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("events older than the retention are still there: %d", len(evs))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

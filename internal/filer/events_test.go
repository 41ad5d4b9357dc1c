package filer

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"
)

type sub struct {
	mu     sync.Mutex
	events []*Event
	cancel context.CancelFunc
	done   chan error
}

func subscribe(f *Filer, since uint64, s *sub) {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan error, 1)
	go func() {
		s.done <- f.Subscribe(ctx, since, func(ev *Event) error {
			s.mu.Lock()
			s.events = append(s.events, ev)
			s.mu.Unlock()
			return nil
		})
	}()
}

func (s *sub) stop() { s.cancel(); <-s.done }

func (s *sub) count() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.events) }

func (s *sub) waitFor(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for s.count() < n {
		if time.Now().After(deadline) {
			t.Fatalf("subscriber has %d events, want %d", s.count(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type wantEvent struct {
	typ      EventType
	old, new string
}

// TestSubscriberSeesRandomWorkloadAcrossRestart runs a random workload
// (10,000 operations; 1,000 with -short), restarting the filer half-way,
// and checks that a subscriber resuming from its last sequence number sees
// every event exactly once, in order, and that replaying them rebuilds the
// namespace.
func TestSubscriberSeesRandomWorkloadAcrossRestart(t *testing.T) {
	ops := 10000
	if testing.Short() {
		ops = 1000
	}
	// A stopped clock: the directories' times stay recent, so no change of
	// their names rewrites them (namesChanged) and every event is one of
	// the workload's.
	stopped := time.Now()
	conf := Config{PollInterval: 20 * time.Millisecond, Now: func() time.Time { return stopped }}
	e := newEnv(t, conf)
	ctx := context.Background()
	for d := 0; d < 5; d++ {
		if err := e.f.Mkdir(ctx, fmt.Sprintf("/w/%d", d), 0o755, false); err != nil {
			t.Fatal(err)
		}
	}
	base, err := e.f.LastSeq(ctx)
	if err != nil || base != 6 { // /w and five subdirectories
		t.Fatalf("LastSeq %d, %v", base, err)
	}
	s := &sub{}
	subscribe(e.f, base, s)
	rnd := rand.New(rand.NewPCG(9, 9))
	var files []string
	var want []wantEvent
	next := 0
	for i := 0; i < ops; i++ {
		if i == ops/2 {
			s.waitFor(t, len(want)/2) // part-way through, then cut it off
			s.stop()
			e.restart(t, conf)
			s.mu.Lock()
			last := s.events[len(s.events)-1].Seq
			s.mu.Unlock()
			subscribe(e.f, last, s)
		}
		op := rnd.IntN(10)
		if len(files) == 0 {
			op = 0
		}
		var w wantEvent
		var err error
		switch {
		case op < 4:
			p := fmt.Sprintf("/w/%d/f%d", rnd.IntN(5), next)
			next++
			_, err = e.f.WriteFile(ctx, p, bytes.NewReader([]byte(p)), WriteOptions{})
			files = append(files, p)
			w = wantEvent{EventCreate, "", p}
		case op < 6:
			p := files[rnd.IntN(len(files))]
			_, err = e.f.WriteAt(ctx, p, int64(rnd.IntN(8)), bytes.NewReader([]byte("zz")), WriteOptions{})
			w = wantEvent{EventUpdate, p, p}
		case op < 8:
			k := rnd.IntN(len(files))
			from := files[k]
			to := fmt.Sprintf("/w/%d/r%d", rnd.IntN(5), next)
			next++
			err = e.f.Rename(ctx, from, to)
			files[k] = to
			w = wantEvent{EventRename, from, to}
		default:
			k := rnd.IntN(len(files))
			p := files[k]
			files = append(files[:k], files[k+1:]...)
			err = e.f.DeleteEntry(ctx, p, false)
			w = wantEvent{EventDelete, p, ""}
		}
		if err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
		want = append(want, w)
	}
	s.waitFor(t, len(want))
	s.stop()
	if len(s.events) != len(want) {
		t.Fatalf("got %d events, want %d", len(s.events), len(want))
	}
	live := map[string]bool{}
	for i, ev := range s.events {
		if ev.Seq != base+uint64(i)+1 {
			t.Fatalf("event %d has seq %d, want %d", i, ev.Seq, base+uint64(i)+1)
		}
		var old, new string
		if ev.Old != nil {
			old = ev.Old.Path
			delete(live, old)
		}
		if ev.New != nil {
			new = ev.New.Path
			live[new] = true
		}
		if got := (wantEvent{ev.Type, old, new}); got != want[i] {
			t.Fatalf("event %d: got %+v want %+v", i, got, want[i])
		}
	}
	var replayed, actual []string
	for p := range live {
		replayed = append(replayed, p)
	}
	for p := range snapshot(t, e.st) {
		if len(p) > len("/w/0") { // files, not the directories made before
			actual = append(actual, p)
		}
	}
	sort.Strings(replayed)
	sort.Strings(actual)
	if fmt.Sprint(replayed) != fmt.Sprint(actual) {
		t.Fatalf("replaying the log gives %d files, the namespace has %d", len(replayed), len(actual))
	}
}

func TestImplicitParentsAreLogged(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	e.write(t, "/a/b/c", []byte("x"))
	evs, err := e.f.ReadEvents(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Type.String()+" "+ev.New.Path)
	}
	if fmt.Sprint(got) != "[create /a create /a/b create /a/b/c]" {
		t.Fatalf("events %v", got)
	}
}

package consensus

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"
)

func openTest(t *testing.T, dir string, block uint64) *Node {
	t.Helper()
	n, err := Open(Config{
		Dir: dir, ID: "m1", BindAddr: "127.0.0.1:0", KeyBlock: block,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.WaitLeader(ctx); err != nil {
		n.Close()
		t.Fatal(err)
	}
	if !n.IsLeader() {
		n.Close()
		t.Fatal("single node did not become leader")
	}
	return n
}

func TestRestartKeepsSequenceAndVolumeID(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	n := openTest(t, dir, 1000)
	var lastKey uint64
	for i := 0; i < 5; i++ {
		k, err := n.NextKeys(ctx, 300)
		if err != nil {
			t.Fatal(err)
		}
		if k <= lastKey {
			t.Fatalf("key %d not above %d", k, lastKey)
		}
		lastKey = k + 299
	}
	vid, err := n.NextVolumeIDs(ctx, 3)
	if err != nil || vid != 1 {
		t.Fatalf("NextVolumeIDs = %d, %v; want 1", vid, err)
	}
	if err := n.RaiseVolumeID(ctx, 10); err != nil {
		t.Fatal(err)
	}
	limit := uint64(1 << 30)
	if err := n.UpdateSettings(ctx, SettingsUpdate{VolumeSizeLimit: &limit, CollectionReplication: map[string]string{"pics": "001"}}); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n = openTest(t, dir, 1000)
	defer n.Close()
	st := n.State()
	if st.MaxVolumeID != 10 || st.Settings.VolumeSizeLimit != limit || st.Settings.CollectionReplication["pics"] != "001" {
		t.Fatalf("state after restart = %+v", st)
	}
	if st.KeyCeiling <= lastKey {
		t.Fatalf("ceiling %d not above last key %d", st.KeyCeiling, lastKey)
	}
	k, err := n.NextKeys(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if k <= lastKey {
		t.Fatalf("key after restart %d not above %d", k, lastKey)
	}
	vid, err = n.NextVolumeIDs(ctx, 1)
	if err != nil || vid != 11 {
		t.Fatalf("volume id after restart = %d, %v; want 11", vid, err)
	}
}

func TestRestartFromSnapshot(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	n := openTest(t, dir, 10)
	var last uint64
	for i := 0; i < 50; i++ {
		k, err := n.NextKeys(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		last = k + 9
	}
	if err := n.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	n.Close()
	n = openTest(t, dir, 10)
	defer n.Close()
	k, err := n.NextKeys(ctx, 1)
	if err != nil || k <= last {
		t.Fatalf("key after snapshot restore = %d, %v; want > %d", k, err, last)
	}
}

func TestConcurrentNextKeysNeverOverlap(t *testing.T) {
	n := openTest(t, t.TempDir(), 500)
	defer n.Close()
	type span struct{ first, count uint64 }
	var mu sync.Mutex
	var spans []span
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				c := uint64(1 + (g+i)%7)
				if i%97 == 0 {
					c = 700 // bigger than a block
				}
				k, err := n.NextKeys(context.Background(), c)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				spans = append(spans, span{k, c})
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	sort.Slice(spans, func(i, j int) bool { return spans[i].first < spans[j].first })
	for i := 1; i < len(spans); i++ {
		if spans[i-1].first+spans[i-1].count > spans[i].first {
			t.Fatalf("overlap: %+v and %+v", spans[i-1], spans[i])
		}
	}
	if spans[0].first == 0 {
		t.Fatal("key 0 handed out")
	}
}

func TestAdminLock(t *testing.T) {
	n := openTest(t, t.TempDir(), 100)
	defer n.Close()
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l, err := n.AcquireAdminLock(ctx, "alice", 0, time.Minute, t0)
	if err != nil || l.Owner != "alice" {
		t.Fatalf("acquire: %+v %v", l, err)
	}
	if _, err := n.AcquireAdminLock(ctx, "bob", 0, time.Minute, t0.Add(30*time.Second)); !errors.Is(err, ErrLocked) {
		t.Fatalf("bob during alice's lease: %v", err)
	}
	if _, err := n.AcquireAdminLock(ctx, "alice", 0, time.Minute, t0.Add(30*time.Second)); !errors.Is(err, ErrLocked) {
		t.Fatalf("a second acquire by the same owner must not share the lock: %v", err)
	}
	renewed, err := n.AcquireAdminLock(ctx, "alice", l.Token, time.Minute, t0.Add(30*time.Second))
	if err != nil || renewed.Token != l.Token || !renewed.ExpiresAt.Equal(t0.Add(90*time.Second)) {
		t.Fatalf("renew: %+v %v", renewed, err)
	}
	if _, err := n.AcquireAdminLock(ctx, "alice", l.Token+5, time.Minute, t0.Add(31*time.Second)); !errors.Is(err, ErrNotLockOwner) {
		t.Fatalf("renew with a wrong token: %v", err)
	}

	// Settings guarded by the lock: the right token at a time inside the lease.
	code := "001"
	if err := n.UpdateSettings(ctx, SettingsUpdate{DefaultReplication: &code, LockToken: l.Token, Now: t0.Add(time.Minute)}); err != nil {
		t.Fatalf("configure with the lock: %v", err)
	}
	other := "010"
	if err := n.UpdateSettings(ctx, SettingsUpdate{DefaultReplication: &other, LockToken: l.Token, Now: t0.Add(2 * time.Minute)}); !errors.Is(err, ErrNotLockOwner) {
		t.Fatalf("configure after the lease ran out: %v", err)
	}
	if got := n.State().Settings.DefaultReplication; got != "001" {
		t.Fatalf("default replication = %q, want 001", got)
	}

	b, err := n.AcquireAdminLock(ctx, "bob", 0, time.Minute, t0.Add(2*time.Minute))
	if err != nil || b.Token == l.Token {
		t.Fatalf("bob after expiry: %+v %v", b, err)
	}
	if _, err := n.AcquireAdminLock(ctx, "alice", l.Token, time.Minute, t0.Add(2*time.Minute)); !errors.Is(err, ErrNotLockOwner) {
		t.Fatalf("alice renewing a lock bob took: %v", err)
	}
	if err := n.ReleaseAdminLock(ctx, "alice", l.Token); !errors.Is(err, ErrNotLockOwner) {
		t.Fatalf("stale release: %v", err)
	}
	if err := n.ReleaseAdminLock(ctx, "bob", b.Token); err != nil {
		t.Fatal(err)
	}
	if n.State().Lock.Owner != "" {
		t.Fatal("lock still held after release")
	}
}

func TestDecodeRejectsUnknownEntries(t *testing.T) {
	for _, data := range [][]byte{nil, {9, 1, '{', '}'}, {commandVersion, 99, '{', '}'}, {commandVersion, byte(cmdReserveKeys), 'x'}} {
		if _, _, err := decodeCommand(data); !errors.Is(err, ErrBadEntry) {
			t.Errorf("decode %q: %v", data, err)
		}
	}
}

func TestSingleNodeMovesToNewIDAndAddress(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	n := openTest(t, dir, 100)
	k1, err := n.NextKeys(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	// Another id, another (random) port: the group must still elect itself
	// and keep its state.
	n2, err := Open(Config{Dir: dir, ID: "m-moved", BindAddr: "127.0.0.1:0", KeyBlock: 100,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := n2.WaitLeader(wctx); err != nil || !n2.IsLeader() {
		t.Fatalf("moved node not leader: %v", err)
	}
	k2, err := n2.NextKeys(ctx, 1)
	if err != nil || k2 <= k1 {
		t.Fatalf("key after move %d, %v; want > %d", k2, err, k1)
	}
	if id, _ := n2.Leader(); id != "m-moved" {
		t.Fatalf("leader id %q", id)
	}
}

func TestAdminCredentialFirstOneWins(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	n := openTest(t, dir, 100)
	first := AdminCredential{User: "admin", Hash: "h1", CreatedBy: "m1"}
	if won, err := n.InitAdminCredential(ctx, first); err != nil || !won {
		t.Fatalf("first credential: won %v, %v", won, err)
	}
	if won, err := n.InitAdminCredential(ctx, AdminCredential{User: "admin", Hash: "h2"}); err != nil || won {
		t.Fatalf("second credential: won %v, %v; want it ignored", won, err)
	}
	if _, err := n.InitAdminCredential(ctx, AdminCredential{User: "admin"}); err == nil {
		t.Fatal("a credential without a hash was accepted")
	}
	if got := n.State().AdminCredential; got != first {
		t.Fatalf("credential %+v, want %+v", got, first)
	}
	n.Close()
	n = openTest(t, dir, 100)
	defer n.Close()
	if got := n.State().AdminCredential; got != first {
		t.Fatalf("after a restart: %+v, want %+v", got, first)
	}
}

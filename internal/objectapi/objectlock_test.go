package objectapi

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func newLockLayer(t *testing.T) *Layer {
	l, _ := newLostAckLayer(t)
	if err := l.EnableObjectLock(context.Background(), "bkt"); err != nil {
		t.Fatal(err)
	}
	return l
}

func putLock(t *testing.T, l *Layer, key string, lk ObjectLock) string {
	t.Helper()
	oi, err := l.PutObject(context.Background(), "bkt", key, strings.NewReader("v"), PutOptions{Size: 1, Metadata: Metadata{Lock: lk}})
	if err != nil {
		t.Fatal(err)
	}
	return oi.VersionID
}

// A legal hold set by version id while other writers keep archiving that
// version lands on it (modifyLock follows the version, never another one).
func TestLegalHoldFollowsAVersionBeingArchived(t *testing.T) {
	ctx := context.Background()
	l := newLockLayer(t)
	for round := 0; round < 10; round++ {
		v1 := putLock(t, l, "k", ObjectLock{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 3; i++ {
				putLock(t, l, "k", ObjectLock{})
			}
		}()
		if err := l.PutObjectLegalHold(ctx, "bkt", "k", v1, true); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		wg.Wait()
		if lk, err := l.GetObjectLock(ctx, "bkt", "k", v1); err != nil || !lk.LegalHold {
			t.Fatalf("round %d: version %s lock %+v, %v", round, v1, lk, err)
		}
		if lk, _ := l.GetObjectLock(ctx, "bkt", "k", ""); lk.LegalHold {
			t.Fatalf("round %d: the hold landed on the latest version", round)
		}
	}
}

// Concurrent deletes of a held version, current or not, all fail and leave
// it readable; GOVERNANCE retention yields only to WithGovernanceBypass.
func TestLockedVersionSurvivesConcurrentDeletes(t *testing.T) {
	ctx := context.Background()
	l := newLockLayer(t)
	held := putLock(t, l, "k", ObjectLock{LegalHold: true})
	gov := putLock(t, l, "g", ObjectLock{Mode: LockGovernance, RetainUntil: time.Now().Add(time.Hour)})
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if i%2 == 0 {
				putLock(t, l, "k", ObjectLock{})
				return
			}
			if _, err := l.DeleteObjectVersion(WithGovernanceBypass(ctx), "bkt", "k", held); !errors.Is(err, ErrObjectLocked) {
				t.Errorf("delete of a held version: %v", err)
			}
		}(i)
	}
	wg.Wait()
	if _, err := l.GetObject(ctx, "bkt", "k", GetOptions{VersionID: held, NoBody: true}); err != nil {
		t.Fatalf("held version: %v", err)
	}
	if _, err := l.DeleteObjectVersion(ctx, "bkt", "g", gov); !errors.Is(err, ErrObjectLocked) {
		t.Fatalf("delete of a GOVERNANCE version without bypass: %v", err)
	}
	if _, err := l.DeleteObjectVersion(WithGovernanceBypass(ctx), "bkt", "g", gov); err != nil {
		t.Fatalf("delete of a GOVERNANCE version with bypass: %v", err)
	}
}

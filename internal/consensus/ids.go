package consensus

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// keyAllocator hands out file keys from a block reserved through raft. mu
// guards the block and is never held across I/O; refill serialises the
// reservations so that concurrent assigns that find the block empty cause one
// Apply, not one each.
type keyAllocator struct {
	block uint64

	mu    sync.Mutex
	next  uint64
	limit uint64 // exclusive
	gen   uint64 // bumped by reset, so a refill racing a reset is discarded

	refill sync.Mutex
}

func (k *keyAllocator) take(count uint64) (uint64, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.limit-k.next >= count && k.next != 0 {
		first := k.next
		k.next += count
		return first, true
	}
	return 0, false
}

func (k *keyAllocator) reset() {
	k.mu.Lock()
	k.next, k.limit = 0, 0
	k.gen++
	k.mu.Unlock()
}

// NextKeys reserves count consecutive file keys and returns the first. Only
// the leader hands out keys; others get ErrNotLeader.
func (n *Node) NextKeys(ctx context.Context, count uint64) (uint64, error) {
	if count == 0 {
		count = 1
	}
	if !n.IsLeader() {
		return 0, ErrNotLeader
	}
	k := &n.keys
	for {
		if first, ok := k.take(count); ok {
			return first, nil
		}
		k.refill.Lock()
		if first, ok := k.take(count); ok {
			k.refill.Unlock()
			return first, nil
		}
		k.mu.Lock()
		gen := k.gen
		k.mu.Unlock()
		size := max(k.block, count)
		res, err := n.apply(ctx, cmdReserveKeys, &reserveKeys{Count: size})
		if err == nil {
			k.mu.Lock()
			if k.gen == gen {
				// The rest of the old block is skipped: cheaper than tracking
				// fragments, and the key space is 64 bits.
				k.next, k.limit = res.value, res.value+size
			}
			k.mu.Unlock()
		}
		k.refill.Unlock()
		if err != nil {
			return 0, err
		}
	}
}

// NextVolumeIDs allocates count new volume ids and returns the first; the ids
// are first..first+count-1.
func (n *Node) NextVolumeIDs(ctx context.Context, count int) (uint32, error) {
	if count <= 0 {
		return 0, fmt.Errorf("consensus: NextVolumeIDs(%d)", count)
	}
	res, err := n.apply(ctx, cmdReserveVolumeIDs, &reserveVolumeIDs{Count: uint32(count)})
	if err != nil {
		return 0, err
	}
	return uint32(res.value), nil
}

// RaiseVolumeID makes sure new volume ids are above id. The master calls it
// for volumes reported by volume servers, so that a master whose metadata was
// lost never reuses an id that exists on disk.
func (n *Node) RaiseVolumeID(ctx context.Context, id uint32) error {
	if n.fsm.current().MaxVolumeID >= id {
		return nil
	}
	_, err := n.apply(ctx, cmdRaiseVolumeID, &raiseVolumeID{ID: id})
	return err
}

// SettingsUpdate changes the fields that are non-nil.
type SettingsUpdate struct {
	VolumeSizeLimit    *uint64
	DefaultReplication *string
	// CollectionReplication sets per-collection defaults; an empty code removes one.
	CollectionReplication map[string]string
	// EcScheme sets erasure-coding schemes by collection ("" = the default).
	EcScheme map[string]string
	// WritePolicy sets write policies by collection ("" = the default).
	WritePolicy map[string]string
	// LockToken, when not 0, makes the change conditional: it is committed
	// only if this token holds the admin lock at Now (else ErrNotLockOwner).
	LockToken uint64
	Now       time.Time
}

// UpdateSettings commits a settings change.
func (n *Node) UpdateSettings(ctx context.Context, u SettingsUpdate) error {
	_, err := n.apply(ctx, cmdSetSettings, &setSettings{
		VolumeSizeLimit: u.VolumeSizeLimit, DefaultReplication: u.DefaultReplication, Collection: u.CollectionReplication,
		EcScheme: u.EcScheme, WritePolicy: u.WritePolicy, LockToken: u.LockToken, Now: u.Now,
	})
	return err
}

// AcquireAdminLock takes the admin lock for owner until now+lease (token 0),
// or renews the lock owner holds with token. Taking fails with ErrLocked while
// anyone's lease runs, the same owner's included: two shells started by one
// user must not share the lock. Renewing fails with ErrNotLockOwner when the
// token is no longer the lock's (it expired and someone else took it).
func (n *Node) AcquireAdminLock(ctx context.Context, owner string, token uint64, lease time.Duration, now time.Time) (AdminLock, error) {
	if owner == "" {
		return AdminLock{}, fmt.Errorf("consensus: admin lock needs an owner")
	}
	if lease <= 0 {
		return AdminLock{}, fmt.Errorf("consensus: admin lock lease %v must be positive", lease)
	}
	res, err := n.apply(ctx, cmdAcquireLock, &acquireLock{Owner: owner, Token: token, Now: now, Lease: int64(lease)})
	return res.lock, err
}

// ReleaseAdminLock releases the lock held by owner with token.
func (n *Node) ReleaseAdminLock(ctx context.Context, owner string, token uint64) error {
	_, err := n.apply(ctx, cmdReleaseLock, &releaseLock{Owner: owner, Token: token})
	return err
}

// InitAdminCredential commits c as the admin UI's credential unless the
// cluster has one already; won says whether c is now the credential.
func (n *Node) InitAdminCredential(ctx context.Context, c AdminCredential) (won bool, err error) {
	if c.User == "" || c.Hash == "" {
		return false, fmt.Errorf("consensus: an admin credential needs a user and a hash")
	}
	res, err := n.apply(ctx, cmdInitAdminCredential, &initAdminCredential{Credential: c})
	return res.value == 1, err
}

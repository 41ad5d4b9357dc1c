package consensus

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

var (
	// ErrNotLeader is returned by calls that only the leader may make.
	ErrNotLeader = errors.New("consensus: not the leader")
	// ErrLocked is returned when the admin lock is held by someone else.
	ErrLocked = errors.New("consensus: admin lock is held")
	// ErrNotLockOwner is returned when releasing a lock one does not hold.
	ErrNotLockOwner = errors.New("consensus: not the admin lock owner")
	// ErrBadEntry marks a log entry or snapshot this version cannot read.
	ErrBadEntry = errors.New("consensus: unreadable log entry")
	// ErrExhausted is returned when an id space would overflow.
	ErrExhausted = errors.New("consensus: id space exhausted")
)

// State is the replicated state. Values returned to callers are copies.
type State struct {
	// KeyCeiling: every file key below it may have been handed out; keys start at 1.
	KeyCeiling  uint64    `json:"keyCeiling"`
	MaxVolumeID uint32    `json:"maxVolumeId"`
	Settings    Settings  `json:"settings"`
	Lock        AdminLock `json:"adminLock"`
	// AdminCredential is the admin UI's login when no master was given
	// one: generated once by a leader, the same on every master.
	AdminCredential AdminCredential `json:"adminCredential,omitzero"`
	// Deficits are the under-replicated volumes of degraded-policy
	// collections by volume id (see internal/topology.WritePolicy): which
	// copies hold every acknowledged write. Kept here so that a new leader
	// knows which present copies missed writes.
	Deficits map[uint32]Deficit `json:"deficits,omitempty"`
}

// AdminCredential is a user and a bcrypt hash of its password (never the
// password: the Raft log and snapshots are not secret enough for it).
type AdminCredential struct {
	User string `json:"user"`
	Hash string `json:"hash"`
	// CreatedBy is the master that generated it, whose MetaDir holds the
	// password.
	CreatedBy string `json:"createdBy,omitempty"`
}

// Settings are cluster-wide settings; zero values mean "not set", and the
// master falls back to its own configuration.
type Settings struct {
	VolumeSizeLimit    uint64 `json:"volumeSizeLimit,omitempty"`
	DefaultReplication string `json:"defaultReplication,omitempty"`
	// CollectionReplication overrides DefaultReplication per collection.
	CollectionReplication map[string]string `json:"collectionReplication,omitempty"`
	// EcScheme is the erasure-coding scheme ("k+m") by collection; the key
	// "" holds the cluster's default.
	EcScheme map[string]string `json:"ecScheme,omitempty"`
	// WritePolicy is the write policy by collection ("" = the cluster's
	// default): "strict" or "degraded:N" (see internal/topology.WritePolicy).
	WritePolicy map[string]string `json:"writePolicy,omitempty"`
}

// AdminLock is the shell's exclusive lock. Token grows on every new holder so
// that a holder whose lease ran out cannot release its successor's lock.
type AdminLock struct {
	Owner     string    `json:"owner,omitempty"`
	Token     uint64    `json:"token"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// check reports whether token holds the lock at now.
func (l AdminLock) check(token uint64, now time.Time) error {
	if l.Owner == "" || l.Token != token || !now.Before(l.ExpiresAt) {
		return fmt.Errorf("%w: token %d does not hold the admin lock", ErrNotLockOwner, token)
	}
	return nil
}

func (s State) clone() State {
	s.Settings.CollectionReplication = maps.Clone(s.Settings.CollectionReplication)
	s.Settings.EcScheme = maps.Clone(s.Settings.EcScheme)
	s.Settings.WritePolicy = maps.Clone(s.Settings.WritePolicy)
	if s.Deficits != nil {
		ds := make(map[uint32]Deficit, len(s.Deficits))
		for vid, d := range s.Deficits {
			d.Good = slices.Clone(d.Good)
			ds[vid] = d
		}
		s.Deficits = ds
	}
	return s
}

// fsm applies committed commands to State. raft calls Apply from one
// goroutine; mu lets readers see a consistent copy at any time.
type fsm struct {
	mu    sync.Mutex
	state State
	// settingsGen counts applied settings changes (and restores), so that
	// readers can cache Settings and notice a change with one atomic load.
	settingsGen atomic.Uint64
}

// applyResult is what fsm.Apply returns through raft's ApplyFuture.Response.
type applyResult struct {
	value uint64
	lock  AdminLock
	err   error
}

func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return applyResult{}
	}
	t, body, err := decodeCommand(l.Data)
	if err != nil {
		return applyResult{err: err}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	res := f.state.apply(t, body)
	if t == cmdSetSettings && res.err == nil {
		f.settingsGen.Add(1)
	}
	return res
}

// apply is the state transition function: pure, so tests can drive it.
func (s *State) apply(t commandType, body any) applyResult {
	switch c := body.(type) {
	case *reserveKeys:
		first := max(s.KeyCeiling, 1)
		if first+c.Count < first {
			return applyResult{err: fmt.Errorf("%w: file keys", ErrExhausted)}
		}
		s.KeyCeiling = first + c.Count
		return applyResult{value: first}
	case *reserveVolumeIDs:
		first := uint64(s.MaxVolumeID) + 1
		if first+uint64(c.Count)-1 > uint64(^uint32(0)) {
			return applyResult{err: fmt.Errorf("%w: volume ids", ErrExhausted)}
		}
		s.MaxVolumeID += c.Count
		return applyResult{value: first}
	case *raiseVolumeID:
		s.MaxVolumeID = max(s.MaxVolumeID, c.ID)
		return applyResult{value: uint64(s.MaxVolumeID)}
	case *setSettings:
		if c.LockToken != 0 {
			if err := s.Lock.check(c.LockToken, c.Now); err != nil {
				return applyResult{err: err}
			}
		}
		if c.VolumeSizeLimit != nil {
			s.Settings.VolumeSizeLimit = *c.VolumeSizeLimit
		}
		if c.DefaultReplication != nil {
			s.Settings.DefaultReplication = *c.DefaultReplication
		}
		for coll, code := range c.Collection {
			if s.Settings.CollectionReplication == nil {
				s.Settings.CollectionReplication = map[string]string{}
			}
			if code == "" {
				delete(s.Settings.CollectionReplication, coll)
			} else {
				s.Settings.CollectionReplication[coll] = code
			}
		}
		for coll, scheme := range c.EcScheme {
			if s.Settings.EcScheme == nil {
				s.Settings.EcScheme = map[string]string{}
			}
			if scheme == "" {
				delete(s.Settings.EcScheme, coll)
			} else {
				s.Settings.EcScheme[coll] = scheme
			}
		}
		for coll, policy := range c.WritePolicy {
			if s.Settings.WritePolicy == nil {
				s.Settings.WritePolicy = map[string]string{}
			}
			if policy == "" {
				delete(s.Settings.WritePolicy, coll)
			} else {
				s.Settings.WritePolicy[coll] = policy
			}
		}
		return applyResult{}
	case *acquireLock:
		live := s.Lock.Owner != "" && c.Now.Before(s.Lock.ExpiresAt)
		switch {
		case c.Token != 0:
			// A renewal: only the holder of that very token may extend it,
			// even after its lease ran out, as long as nobody took it since.
			if s.Lock.Owner != c.Owner || s.Lock.Token != c.Token {
				return applyResult{lock: s.Lock, err: fmt.Errorf("%w: token %d is not the lock's (held by %q, token %d)", ErrNotLockOwner, c.Token, s.Lock.Owner, s.Lock.Token)}
			}
		case live:
			return applyResult{lock: s.Lock, err: fmt.Errorf("%w by %q until %s", ErrLocked, s.Lock.Owner, s.Lock.ExpiresAt.Format(time.RFC3339))}
		default:
			s.Lock.Token++
		}
		s.Lock.Owner = c.Owner
		s.Lock.ExpiresAt = c.Now.Add(time.Duration(c.Lease))
		return applyResult{lock: s.Lock}
	case *initAdminCredential:
		if s.AdminCredential.Hash != "" {
			return applyResult{} // value 0: someone else's came first
		}
		s.AdminCredential = c.Credential
		return applyResult{value: 1}
	case *releaseLock:
		if s.Lock.Owner != c.Owner || s.Lock.Token != c.Token {
			return applyResult{err: fmt.Errorf("%w: held by %q token %d", ErrNotLockOwner, s.Lock.Owner, s.Lock.Token)}
		}
		s.Lock.Owner = ""
		s.Lock.ExpiresAt = time.Time{}
		return applyResult{}
	case *setDeficits:
		for _, vid := range c.Clear {
			delete(s.Deficits, vid)
		}
		for vid, d := range c.Set {
			if s.Deficits == nil {
				s.Deficits = map[uint32]Deficit{}
			}
			s.Deficits[vid] = d
		}
		return applyResult{}
	}
	return applyResult{err: fmt.Errorf("%w: command type %d", ErrBadEntry, t)}
}

func (f *fsm) current() State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state.clone()
}

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	b, err := json.Marshal(f.current())
	if err != nil {
		return nil, fmt.Errorf("consensus: snapshot: %w", err)
	}
	return snapshot(b), nil
}

func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var s State
	if err := json.NewDecoder(rc).Decode(&s); err != nil {
		return fmt.Errorf("%w: snapshot: %v", ErrBadEntry, err)
	}
	f.mu.Lock()
	f.state = s
	f.mu.Unlock()
	f.settingsGen.Add(1)
	return nil
}

type snapshot []byte

func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return fmt.Errorf("consensus: write snapshot: %w", err)
	}
	return sink.Close()
}

func (snapshot) Release() {}

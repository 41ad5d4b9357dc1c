// Package kms is Kelp's built-in key service for server-side encryption:
// named 256-bit keys that seal and open data keys (SSE-KMS), and the key
// of SSE-S3, all protected by one master key the operator holds.
//
// Keys live in one JSON file, DIR/keys.json, each key's material sealed
// with AES-256-GCM under the master key (the key id is the AAD, so
// material cannot be moved to another id). Writers (`kelp kms`, and the
// gateway when it creates the default key) take an exclusive flock on
// DIR/keys.lock and replace the file atomically (write, fsync, rename);
// readers reload the file when its modification time or size changes, so
// a key created or disabled with `kelp kms` takes effect in a running
// gateway at its next request.
//
// A gateway also shares the records (Share) through a SharedStore, the
// filer (FilerStore, at FilerPath), so that every gateway over one filer
// has the same keys: the local file and the shared records are merged both
// ways, the record changed last winning (keys are never deleted). The
// shared records carry a check value of the master key; a service with
// another master key is refused (ErrMasterMismatch) before it writes
// anything. The master key itself is never shared.
//
// A key is named by its id (a UUID), by an alias ("alias/NAME"), or by an
// ARN ending in "key/ID" or "alias/NAME". The alias "alias/aws/s3" is the
// default key, created on first use, as in AWS. Data keys are sealed under
// a key with the encryption context (canonical JSON) as AAD, so a data key
// opens only with the context it was made with.
//
// The SSE-S3 key is derived from the master key (HKDF-SHA256, info
// "kelp sse-s3"); it is not in the key file.
//
// The master key is 32 bytes, given as a file or a string holding 64 hex
// digits or standard base64 (MasterKeyFile, ParseMasterKey); EnsureMasterKey
// generates one into a file (mode 0600) when there is none yet.
package kms

import (
	"context"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kelpfs/kelp/internal/sse"
	"github.com/kelpfs/kelp/internal/vfs"
)

// DefaultAlias names the key used when SSE-KMS is asked for without a key.
const DefaultAlias = "alias/aws/s3"

var (
	ErrNotFound = errors.New("kms: key not found")
	ErrDisabled = errors.New("kms: key is disabled")
	// ErrInvalidCiphertext: a sealed data key that does not open with the
	// key and context given.
	ErrInvalidCiphertext = errors.New("kms: the sealed data key does not open with this key and encryption context")
	ErrInvalidAlias      = errors.New("kms: an alias is alias/NAME with letters, digits, '/', '_' and '-'")
	ErrAliasExists       = errors.New("kms: alias already exists")
)

// KeyInfo describes a key (never its material).
type KeyInfo struct {
	ID          string    `json:"id"`
	Alias       string    `json:"alias,omitempty"`
	Description string    `json:"description,omitempty"`
	Enabled     bool      `json:"enabled"`
	Created     time.Time `json:"created"`
}

type storedKey struct {
	KeyInfo
	Material []byte `json:"material"` // sealed under the master key
	// Updated is when the record last changed (zero: when created); of
	// two copies of a record, the one changed last wins (shared.go).
	Updated time.Time `json:"updated,omitzero"`
}

type keyFile struct {
	Version int `json:"version"`
	// Check identifies the master key the records are sealed under
	// (masterCheck); kept in the shared store.
	Check string       `json:"check,omitempty"`
	Keys  []*storedKey `json:"keys"`
}

// Service is the key service over one directory. Safe for concurrent use.
type Service struct {
	dir    string
	master []byte
	s3Key  []byte

	mu    sync.Mutex
	keys  map[string]*storedKey // by id
	plain map[string][]byte     // opened material by id
	stamp string                // modification time and size of the loaded file
	local []*storedKey          // the records of the local file as last read

	// With a shared store (Share), the keys are the merge of the local
	// file and the shared records, kept the same in both.
	shared   SharedStore
	sharedAt time.Time // when the shared records were last read
}

// Open opens the key service in dir (created if needed) with master key
// master. It fails when the keys there were sealed under another master key.
func Open(dir string, master []byte) (*Service, error) {
	if len(master) != sse.KeySize {
		return nil, fmt.Errorf("kms: the master key must be %d bytes, not %d", sse.KeySize, len(master))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	s3k, err := hkdf.Key(sha256.New, master, nil, "kelp sse-s3", sse.KeySize)
	if err != nil {
		return nil, err
	}
	s := &Service{dir: dir, master: master, s3Key: s3k}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadLocked(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Service) path() string { return filepath.Join(s.dir, "keys.json") }

// S3Key is the key encryption key of SSE-S3 objects.
func (s *Service) S3Key() []byte { return s.s3Key }

func materialAAD(id string) []byte { return []byte("kelp-kms1 " + id) }

// reloadLocked reads the key file again if it changed, and the shared
// records when they are older than SharedRefresh (or force).
func (s *Service) reloadLocked() error { return s.reloadForce(false) }

func (s *Service) reloadForce(force bool) error {
	changed := false
	st, err := os.Stat(s.path())
	switch {
	case errors.Is(err, os.ErrNotExist):
		if s.keys == nil {
			s.keys, s.plain = map[string]*storedKey{}, map[string][]byte{}
			changed = true
		}
	case err != nil:
		return err
	default:
		stamp := fmt.Sprintf("%d/%d", st.ModTime().UnixNano(), st.Size())
		if stamp != s.stamp || s.keys == nil {
			kf, err := readKeyFile(s.path())
			if err != nil {
				return err
			}
			s.local, s.stamp, changed = kf.Keys, stamp, true
		}
	}
	if s.shared != nil && (force || changed || time.Since(s.sharedAt) >= SharedRefresh) {
		return s.syncLocked()
	}
	if changed {
		return s.useLocked(s.local)
	}
	return nil
}

// useLocked makes recs the keys in use, opening their material.
func (s *Service) useLocked(recs []*storedKey) error {
	keys, plain := map[string]*storedKey{}, map[string][]byte{}
	for _, k := range recs {
		m, err := sse.OpenKey(s.master, k.Material, materialAAD(k.ID))
		if err != nil {
			return fmt.Errorf("kms: key %s in %s does not open with this master key (a different --kms.master-key-file or KELP_KMS_MASTER_KEY?)", k.ID, s.path())
		}
		keys[k.ID], plain[k.ID] = k, m
	}
	s.keys, s.plain = keys, plain
	return nil
}

// syncLocked merges the local records and the shared ones, writes the
// merge where it is missing (both ways: keys made with `kelp kms` on this
// machine reach the other gateways, and `kelp kms list` here shows every
// gateway's keys) and uses it.
func (s *Service) syncLocked() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := s.shared.Load(ctx)
	if err != nil {
		return fmt.Errorf("kms: reading the keys in %s: %w", s.shared.Where(), err)
	}
	kf, err := parseKeyFile(b, s.shared.Where())
	if err != nil {
		return err
	}
	check := masterCheck(s.master)
	if kf.Check != "" && kf.Check != check {
		return fmt.Errorf("%w: the keys in %s do not open with this gateway's master key; every gateway over one filer needs the same master key (--kms.master-key-file or KELP_KMS_MASTER_KEY, copied from a gateway that already serves it)",
			ErrMasterMismatch, s.shared.Where())
	}
	merged := merge(kf.Keys, s.local)
	if kf.Check == "" || !sameRecords(merged, kf.Keys) {
		err := s.shared.Update(ctx, func(cur []byte) ([]byte, error) {
			now, err := parseKeyFile(cur, s.shared.Where())
			if err != nil {
				return nil, err
			}
			if now.Check != "" && now.Check != check {
				return nil, fmt.Errorf("%w (%s)", ErrMasterMismatch, s.shared.Where())
			}
			now.Version, now.Check = 1, check
			now.Keys = merge(now.Keys, merged)
			merged = now.Keys
			return json.Marshal(now)
		})
		if err != nil {
			return fmt.Errorf("kms: writing the keys to %s: %w", s.shared.Where(), err)
		}
	}
	if err := s.useLocked(merged); err != nil {
		return err
	}
	s.sharedAt = time.Now()
	if !sameRecords(merged, s.local) {
		// Mirror into the local file; an error here is not fatal: the
		// shared records are the ones in use.
		if err := s.writeLocal(merged); err == nil {
			s.stamp = ""
			if st, err := os.Stat(s.path()); err == nil {
				s.stamp = fmt.Sprintf("%d/%d", st.ModTime().UnixNano(), st.Size())
			}
			s.local = merged
		}
	}
	return nil
}

// writeLocal merges recs into the local key file under its lock.
func (s *Service) writeLocal(recs []*storedKey) error {
	return s.withFileLock(func(kf *keyFile) error {
		kf.Keys = merge(kf.Keys, recs)
		return nil
	})
}

// Share makes the service keep its keys in store as well as in its
// directory, so that every gateway over one filer sees the same keys:
// the records already in the directory are imported at once, and it fails
// with ErrMasterMismatch when the store's records were made under another
// master key.
func (s *Service) Share(store SharedStore) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shared = store
	if err := s.reloadForce(true); err != nil {
		s.shared = nil
		return err
	}
	return nil
}

func readKeyFile(path string) (*keyFile, error) {
	var kf keyFile
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &keyFile{Version: 1}, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &kf); err != nil {
		return nil, fmt.Errorf("kms: %s: %w", path, err)
	}
	return &kf, nil
}

// update runs fn on the key file under the lock, writes it back and
// reloads (pushing the change to the shared store, if any).
func (s *Service) update(fn func(kf *keyFile) error) error {
	s.mu.Lock()
	if s.shared != nil {
		// The local file has every shared key before it is changed.
		if err := s.reloadForce(true); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	s.mu.Unlock()
	if err := s.withFileLock(fn); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stamp = ""
	return s.reloadForce(true)
}

// withFileLock runs fn on the local key file under its lock and writes
// it back. It never holds s.mu: reloads hold s.mu and may take the lock.
func (s *Service) withFileLock(fn func(kf *keyFile) error) error {
	lock, err := os.OpenFile(filepath.Join(s.dir, "keys.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	kf, err := readKeyFile(s.path())
	if err != nil {
		return err
	}
	if err := fn(kf); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(kf, "", "  ")
	return vfs.WriteFileAtomic(vfs.OS(), s.path(), append(b, '\n'), 0o600)
}

func newID() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func validAlias(a string) bool {
	name, ok := strings.CutPrefix(a, "alias/")
	if !ok || name == "" || len(a) > 256 {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("/_-", c)) {
			return false
		}
	}
	return true
}

// Create makes a new enabled key; alias ("" none) must be unused and not
// start with alias/aws/, which is reserved as in AWS.
func (s *Service) Create(alias, description string) (KeyInfo, error) {
	if alias != "" && !strings.HasPrefix(alias, "alias/") {
		alias = "alias/" + alias
	}
	if alias != "" && !validAlias(alias) {
		return KeyInfo{}, ErrInvalidAlias
	}
	if strings.HasPrefix(alias, "alias/aws/") {
		return KeyInfo{}, fmt.Errorf("%w: the prefix alias/aws/ is reserved", ErrInvalidAlias)
	}
	return s.create(alias, description)
}

func (s *Service) create(alias, description string) (KeyInfo, error) {
	var out KeyInfo
	err := s.update(func(kf *keyFile) error {
		for _, k := range kf.Keys {
			if alias != "" && k.Alias == alias {
				return fmt.Errorf("%w: %s", ErrAliasExists, alias)
			}
		}
		id := newID()
		sealed, err := sse.SealKey(s.master, sse.NewKey(), materialAAD(id))
		if err != nil {
			return err
		}
		k := &storedKey{KeyInfo: KeyInfo{ID: id, Alias: alias, Description: description, Enabled: true,
			Created: time.Now().UTC().Truncate(time.Second)}, Material: sealed}
		kf.Version = 1
		kf.Keys = append(kf.Keys, k)
		out = k.KeyInfo
		return nil
	})
	return out, err
}

// refID turns a key reference (id, alias, key or alias ARN) into an id or
// an alias.
func refID(ref string) string {
	if strings.HasPrefix(ref, "arn:") {
		if i := strings.Index(ref, ":key/"); i >= 0 {
			return ref[i+len(":key/"):]
		}
		if i := strings.Index(ref, ":alias/"); i >= 0 {
			return ref[i+1:]
		}
	}
	return ref
}

// findLocked resolves ref among the loaded keys.
func (s *Service) findLocked(ref string) *storedKey {
	ref = refID(ref)
	if k := s.keys[ref]; k != nil {
		return k
	}
	var found *storedKey
	if strings.HasPrefix(ref, "alias/") {
		// Two gateways may have given one alias to two keys at once: the
		// older key keeps it, wherever the records are read.
		for _, k := range s.keys {
			if k.Alias == ref && (found == nil || k.Created.Before(found.Created) ||
				k.Created.Equal(found.Created) && k.ID < found.ID) {
				found = k
			}
		}
	}
	return found
}

// Describe returns the key ref names.
func (s *Service) Describe(ref string) (KeyInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadLocked(); err != nil {
		return KeyInfo{}, err
	}
	k := s.findLocked(ref)
	if k == nil {
		return KeyInfo{}, fmt.Errorf("%w: %s", ErrNotFound, ref)
	}
	return k.KeyInfo, nil
}

// List returns every key, oldest first.
func (s *Service) List() ([]KeyInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadLocked(); err != nil {
		return nil, err
	}
	out := make([]KeyInfo, 0, len(s.keys))
	for _, k := range s.keys {
		out = append(out, k.KeyInfo)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// SetEnabled enables or disables the key ref names. Objects under a
// disabled key cannot be read or written until it is enabled again.
func (s *Service) SetEnabled(ref string, enabled bool) (KeyInfo, error) {
	var out KeyInfo
	err := s.update(func(kf *keyFile) error {
		id := refID(ref)
		for _, k := range kf.Keys {
			if k.ID == id || k.Alias == id {
				k.Enabled = enabled
				k.Updated = time.Now().UTC()
				out = k.KeyInfo
				return nil
			}
		}
		return fmt.Errorf("%w: %s", ErrNotFound, ref)
	})
	return out, err
}

// DefaultKey returns the default key (alias/aws/s3), creating it on first use.
func (s *Service) DefaultKey() (KeyInfo, error) {
	ki, err := s.Describe(DefaultAlias)
	if errors.Is(err, ErrNotFound) && s.isShared() {
		s.mu.Lock()
		err = s.reloadForce(true) // another gateway may have made it
		s.mu.Unlock()
		if err != nil {
			return KeyInfo{}, err
		}
		ki, err = s.Describe(DefaultAlias)
	}
	if !errors.Is(err, ErrNotFound) {
		return ki, err
	}
	ki, err = s.create(DefaultAlias, "Default key for SSE-KMS when no key is named")
	if errors.Is(err, ErrAliasExists) { // another process made it first
		return s.Describe(DefaultAlias)
	}
	return ki, err
}

func (s *Service) isShared() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shared != nil
}

// usable returns the opened material of an enabled key.
func (s *Service) usable(ref string) (string, []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadLocked(); err != nil {
		return "", nil, err
	}
	k := s.findLocked(ref)
	if k == nil && s.shared != nil {
		// Made through another gateway since the last refresh?
		if err := s.reloadForce(true); err != nil {
			return "", nil, err
		}
		k = s.findLocked(ref)
	}
	if k == nil {
		return "", nil, fmt.Errorf("%w: %s", ErrNotFound, ref)
	}
	if !k.Enabled {
		return "", nil, fmt.Errorf("%w: %s", ErrDisabled, k.ID)
	}
	return k.ID, s.plain[k.ID], nil
}

// Seal seals data key dk under the key ref names with encryption context
// ctx as AAD; it returns the key's id and the sealed data key.
func (s *Service) Seal(ref string, dk, ctx []byte) (string, []byte, error) {
	id, m, err := s.usable(ref)
	if err != nil {
		return "", nil, err
	}
	sealed, err := sse.SealKey(m, dk, ctx)
	return id, sealed, err
}

// Unseal opens a data key sealed by Seal.
func (s *Service) Unseal(id string, sealed, ctx []byte) ([]byte, error) {
	_, m, err := s.usable(id)
	if err != nil {
		return nil, err
	}
	dk, err := sse.OpenKey(m, sealed, ctx)
	if err != nil {
		return nil, ErrInvalidCiphertext
	}
	return dk, nil
}

// ParseMasterKey decodes a master key given as 64 hex digits or base64.
func ParseMasterKey(v string) ([]byte, error) {
	v = strings.TrimSpace(v)
	if b, err := hex.DecodeString(v); err == nil && len(b) == sse.KeySize {
		return b, nil
	}
	if b, err := base64.StdEncoding.DecodeString(v); err == nil && len(b) == sse.KeySize {
		return b, nil
	}
	return nil, fmt.Errorf("kms: a master key is %d bytes as 64 hex digits or base64", sse.KeySize)
}

// MasterKeyFile reads a master key from a file (hex or base64 text, or
// the 32 raw bytes).
func MasterKeyFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) == sse.KeySize {
		return b, nil
	}
	k, err := ParseMasterKey(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// EnsureMasterKey reads the master key in path, or generates one there
// (mode 0600) when the file does not exist; created reports which.
func EnsureMasterKey(path string) (key []byte, created bool, err error) {
	k, err := MasterKeyFile(path)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return k, false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, err
	}
	k = sse.NewKey()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, os.ErrExist) { // another process won the race
		k, err := MasterKeyFile(path)
		return k, false, err
	}
	if err != nil {
		return nil, false, err
	}
	_, err = f.WriteString(base64.StdEncoding.EncodeToString(k) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return nil, false, err
	}
	return k, true, nil
}

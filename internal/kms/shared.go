package kms

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kelpfs/kelp/internal/filer"
)

// SharedStore keeps the key records (sealed material and state) where
// every gateway of a cluster sees them, e.g. in the filer (FilerStore).
type SharedStore interface {
	// Load returns the stored key file (nil when there is none yet).
	Load(ctx context.Context) ([]byte, error)
	// Update replaces the stored key file with what fn makes of the
	// current one (nil when none), atomically against other writers.
	Update(ctx context.Context, fn func(cur []byte) ([]byte, error)) error
	// Where names the store in messages.
	Where() string
}

// SharedRefresh is how old the shared records a gateway uses may be: a
// key created or disabled through another gateway is seen within it (a
// key asked for that is not known forces a reload at once).
const SharedRefresh = time.Second

// ErrMasterMismatch: the shared records were made under another master key.
var ErrMasterMismatch = errors.New("kms: the shared keys were made under another master key")

// masterCheck identifies a master key without revealing it: every gateway
// over one filer must hold the same, or SSE-S3 and SSE-KMS objects written
// through one would not open through another.
func masterCheck(master []byte) string {
	h := hmac.New(sha256.New, master)
	h.Write([]byte("kelp-kms master key check"))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// updatedAt is when a record last changed (records of older files have
// only their creation time).
func (k *storedKey) updatedAt() time.Time {
	if k.Updated.IsZero() {
		return k.Created
	}
	return k.Updated
}

// merge is the union of two record sets by key id; for an id in both, the
// record changed last wins (ties: a's). Keys are never deleted, so the
// union converges wherever records are merged in whatever order.
func merge(a, b []*storedKey) []*storedKey {
	byID := map[string]*storedKey{}
	var out []*storedKey
	for _, set := range [][]*storedKey{a, b} {
		for _, k := range set {
			old, ok := byID[k.ID]
			if !ok {
				c := *k // never change the inputs
				byID[k.ID] = &c
				out = append(out, &c)
				continue
			}
			if k.updatedAt().After(old.updatedAt()) {
				*old = *k
			}
		}
	}
	slices.SortFunc(out, func(x, y *storedKey) int {
		if c := x.Created.Compare(y.Created); c != 0 {
			return c
		}
		return cmpString(x.ID, y.ID)
	})
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sameRecords reports whether two record sets hold the same records.
func sameRecords(a, b []*storedKey) bool {
	ja, _ := json.Marshal(merge(a, nil))
	jb, _ := json.Marshal(merge(b, nil))
	return string(ja) == string(jb)
}

func parseKeyFile(b []byte, where string) (*keyFile, error) {
	kf := &keyFile{Version: 1}
	if len(b) == 0 {
		return kf, nil
	}
	if err := json.Unmarshal(b, kf); err != nil {
		return nil, fmt.Errorf("kms: %s: %w", where, err)
	}
	return kf, nil
}

// Entries is what FilerStore needs of the filer; *filer.Filer and the S3
// gateway's namespace satisfy it.
type Entries interface {
	FindEntry(ctx context.Context, p string) (*filer.Entry, error)
	CreateEntry(ctx context.Context, e *filer.Entry, opts filer.CreateOptions) error
	ModifyEntry(ctx context.Context, p string, fn func(e *filer.Entry) error) error
}

// FilerPath is the filer entry whose xattr FilerXattr holds the key
// records, under the filer's system directory /.kelp (hidden from mounts,
// WebDAV and S3, whose buckets are elsewhere).
const (
	FilerPath  = "/.kelp/kms/keys"
	FilerXattr = "kms.keys"
)

// Refresh reloads the local file when it changed and the shared records
// when they are older than SharedRefresh, merging them both ways (a
// gateway calls it in the background, so that keys made with `kelp kms`
// reach the other gateways even while no request uses the key service).
func (s *Service) Refresh() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reloadLocked()
}

// FilerStore keeps the key records in the filer ns at FilerPath.
func FilerStore(ns Entries) SharedStore { return filerStore{ns} }

type filerStore struct{ ns Entries }

func (f filerStore) Where() string { return "the filer's " + FilerPath }

func (f filerStore) Load(ctx context.Context) ([]byte, error) {
	e, err := f.ns.FindEntry(ctx, FilerPath)
	if errors.Is(err, filer.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return e.Xattrs[FilerXattr], nil
}

func (f filerStore) Update(ctx context.Context, fn func(cur []byte) ([]byte, error)) error {
	modify := func() error {
		return f.ns.ModifyEntry(ctx, FilerPath, func(e *filer.Entry) error {
			b, err := fn(e.Xattrs[FilerXattr])
			if err != nil {
				return err
			}
			e.Xattrs[FilerXattr] = b
			return nil
		})
	}
	err := modify()
	if !errors.Is(err, filer.ErrNotFound) {
		return err
	}
	err = f.ns.CreateEntry(ctx, &filer.Entry{Path: FilerPath, Mode: 0o600}, filer.CreateOptions{Exclusive: true})
	if err != nil && !errors.Is(err, filer.ErrExists) {
		return err
	}
	return modify()
}

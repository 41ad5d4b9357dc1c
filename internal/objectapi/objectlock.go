package objectapi

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/kelpfs/kelp/internal/filer"
)

// Object lock (S3's WORM protection of object versions).
//
// A bucket has object lock when its xattr s3.lock holds an
// ObjectLockConfig; it is then versioned (Enabled) and stays so, and the
// lock cannot be turned off again. A version is locked while it has a
// legal hold (xattr s3.lock.hold) or a retention (s3.lock.mode and
// s3.lock.until) whose date is still to come. A locked version's data is
// never removed by this package: every path that deletes or replaces a
// version's data (deleteVersion for the current and the noncurrent ones,
// removeObject and putDirObject for directory objects, which are not
// versioned) asks checkUnlocked first, inside the transaction that removes
// it where there is one. Writes to a versioned bucket archive the version
// they replace, so they need no check; a Suspended bucket, the one state
// whose writes replace a null version, cannot have object lock.
//
// GOVERNANCE retention yields to a caller whose context carries
// WithGovernanceBypass (the gateway adds it after checking the
// s3:BypassGovernanceRetention permission); COMPLIANCE retention and legal
// holds yield to nobody.

// Retention modes.
const (
	LockGovernance = "GOVERNANCE"
	LockCompliance = "COMPLIANCE"
)

const (
	xaLockConfig = "s3.lock"       // on a bucket: its ObjectLockConfig (JSON)
	xaLockMode   = "s3.lock.mode"  // on a version: GOVERNANCE | COMPLIANCE
	xaLockUntil  = "s3.lock.until" // on a version: retain-until date, RFC 3339 UTC
	xaLegalHold  = "s3.lock.hold"  // on a version: "1" while under legal hold
)

// Errors of object lock.
var (
	// ErrObjectLocked refuses to delete, replace or weaken the lock of a
	// locked version (S3's AccessDenied).
	ErrObjectLocked = errors.New("objectapi: object version is protected by object lock")
	// ErrNoObjectLockConfig: the bucket has no object lock
	// (ObjectLockConfigurationNotFoundError).
	ErrNoObjectLockConfig = errors.New("objectapi: no object lock configuration")
	// ErrInvalidBucketState: object lock needs versioning Enabled, and a
	// bucket with object lock cannot suspend it (InvalidBucketState).
	ErrInvalidBucketState = errors.New("objectapi: invalid bucket state")
)

// ObjectLockConfig is a bucket's object lock configuration: Enabled, and
// optionally a default retention applied to every new version written
// without one (Mode with Days or Years).
type ObjectLockConfig struct {
	Enabled bool   `json:"enabled"`
	Mode    string `json:"mode,omitempty"`
	Days    int    `json:"days,omitempty"`
	Years   int    `json:"years,omitempty"`
}

// Limits on a default retention period (S3 documents none; these keep
// the date arithmetic far from overflow).
const (
	maxRetentionDays  = 365 * 100
	maxRetentionYears = 100
)

// ObjectLock is a version's retention and legal hold. A zero value is no
// lock. Metadata.Lock carries the one a writer asks for.
type ObjectLock struct {
	Mode        string    // "" (none), LockGovernance or LockCompliance
	RetainUntil time.Time // set exactly when Mode is
	LegalHold   bool
}

// IsZero reports whether l asks for no lock at all.
func (lk ObjectLock) IsZero() bool { return lk.Mode == "" && !lk.LegalHold }

type bypassKey struct{}

// WithGovernanceBypass returns a context in which GOVERNANCE retention
// does not protect a version: deletes and retention changes made with it
// pass. The caller must have checked the requester's right to it.
func WithGovernanceBypass(ctx context.Context) context.Context {
	return context.WithValue(ctx, bypassKey{}, true)
}

func governanceBypassed(ctx context.Context) bool {
	v, _ := ctx.Value(bypassKey{}).(bool)
	return v
}

// lockConfigOf is a bucket's object lock configuration (Enabled false when
// it has none).
func lockConfigOf(b *filer.Entry) ObjectLockConfig {
	var c ObjectLockConfig
	if v := b.Xattrs[xaLockConfig]; len(v) > 0 && json.Unmarshal(v, &c) != nil {
		// Unreadable but present: the bucket had object lock; keep it on
		// (failing closed) without a default retention.
		c = ObjectLockConfig{Enabled: true}
	}
	return c
}

// lockOf reads a version's lock.
func lockOf(e *filer.Entry) ObjectLock {
	var lk ObjectLock
	if m := string(e.Xattrs[xaLockMode]); m != "" {
		t, err := time.Parse(time.RFC3339Nano, string(e.Xattrs[xaLockUntil]))
		if err != nil {
			t = time.Unix(1<<40, 0) // unreadable: protect, as if far away
		}
		lk.Mode, lk.RetainUntil = m, t.UTC()
	}
	lk.LegalHold = string(e.Xattrs[xaLegalHold]) == "1"
	return lk
}

// setRetention records a version's retention (Mode "" removes it).
func setRetention(e *filer.Entry, mode string, until time.Time) {
	if mode == "" {
		delete(e.Xattrs, xaLockMode)
		delete(e.Xattrs, xaLockUntil)
		return
	}
	e.Xattrs[xaLockMode] = []byte(mode)
	e.Xattrs[xaLockUntil] = []byte(until.UTC().Format(time.RFC3339Nano))
}

func setLegalHold(e *filer.Entry, on bool) {
	if on {
		e.Xattrs[xaLegalHold] = []byte("1")
	} else {
		delete(e.Xattrs, xaLegalHold)
	}
}

// setLock records lk on a new version (applyMeta).
func setLock(e *filer.Entry, lk ObjectLock) {
	setRetention(e, lk.Mode, lk.RetainUntil)
	setLegalHold(e, lk.LegalHold)
}

// copyLock carries the lock asked for at CreateMultipartUpload (kept on
// the upload's directory) to the completed object.
func copyLock(from, to *filer.Entry) {
	for _, k := range []string{xaLockMode, xaLockUntil, xaLegalHold} {
		if v := from.Xattrs[k]; len(v) > 0 {
			to.Xattrs[k] = v
		}
	}
}

// checkLockRequest refuses a write that asks for a lock in a bucket
// without object lock, or a retention date that is not in the future.
func (l *Layer) checkLockRequest(b *filer.Entry, lk ObjectLock) error {
	if lk.IsZero() {
		return nil
	}
	if !lockConfigOf(b).Enabled {
		return errorf(ErrInvalidRequest, "Bucket is missing Object Lock Configuration")
	}
	return l.checkRetention(lk.Mode, lk.RetainUntil)
}

// checkRetention checks a retention a client asks for.
func (l *Layer) checkRetention(mode string, until time.Time) error {
	switch mode {
	case "":
		return nil
	case LockGovernance, LockCompliance:
	default:
		return errorf(ErrInvalidArgument, "unknown object lock mode %q", mode)
	}
	if !until.After(l.now()) {
		return errorf(ErrInvalidArgument, "The retain until date must be in the future!")
	}
	return nil
}

// applyDefaultRetention gives a new version written without a retention
// the bucket's default one, counted from now. Delete markers get none.
func (l *Layer) applyDefaultRetention(b *filer.Entry, e *filer.Entry) {
	c := lockConfigOf(b)
	if !c.Enabled || c.Mode == "" || isDeleteMarker(e) || len(e.Xattrs[xaLockMode]) > 0 {
		return
	}
	until := l.now().AddDate(c.Years, 0, c.Days)
	setRetention(e, c.Mode, until)
}

// checkUnlocked refuses the removal of version e (or of its data) while
// it is locked; GOVERNANCE retention yields to WithGovernanceBypass.
func (l *Layer) checkUnlocked(ctx context.Context, e *filer.Entry) error {
	if e == nil {
		return nil
	}
	lk := lockOf(e)
	switch {
	case lk.LegalHold:
		return errorf(ErrObjectLocked, "version %s is under legal hold", versionIDOf(e))
	case lk.Mode == "" || !lk.RetainUntil.After(l.now()):
		return nil
	case lk.Mode == LockGovernance && governanceBypassed(ctx):
		return nil
	}
	return errorf(ErrObjectLocked, "version %s is under %s retention until %s", versionIDOf(e), lk.Mode, lk.RetainUntil.Format(time.RFC3339))
}

// EnableObjectLock turns object lock on for a bucket, with no default
// retention, and versioning with it (CreateBucket with
// x-amz-bucket-object-lock-enabled). A bucket that has it keeps its
// configuration.
func (l *Layer) EnableObjectLock(ctx context.Context, bucket string) error {
	return l.updateBucket(ctx, bucket, func(e *filer.Entry) error {
		e.Xattrs[xaVersioning] = []byte(VersioningEnabled)
		if lockConfigOf(e).Enabled {
			return nil
		}
		return putLockConfig(e, ObjectLockConfig{Enabled: true})
	})
}

func putLockConfig(e *filer.Entry, c ObjectLockConfig) error {
	v, err := json.Marshal(c)
	if err != nil {
		return err
	}
	e.Xattrs[xaLockConfig] = v
	return nil
}

// GetObjectLockConfig returns the bucket's object lock configuration, or
// ErrNoObjectLockConfig.
func (l *Layer) GetObjectLockConfig(ctx context.Context, bucket string) (ObjectLockConfig, error) {
	b, err := l.bucketEntry(ctx, bucket)
	if err != nil {
		return ObjectLockConfig{}, err
	}
	c := lockConfigOf(b)
	if !c.Enabled {
		return c, errorf(ErrNoObjectLockConfig, "%q", bucket)
	}
	return c, nil
}

// PutObjectLockConfig sets the bucket's object lock configuration. It
// must say Enabled. A bucket without object lock gets it only when its
// versioning is Enabled (as S3 allows for existing buckets); a default
// retention needs Mode and exactly one of Days and Years.
func (l *Layer) PutObjectLockConfig(ctx context.Context, bucket string, c ObjectLockConfig) error {
	if err := validLockConfig(c); err != nil {
		return err
	}
	return l.updateBucket(ctx, bucket, func(e *filer.Entry) error {
		if !lockConfigOf(e).Enabled && versioningOf(e) != VersioningEnabled {
			return errorf(ErrInvalidBucketState, "Versioning must be 'Enabled' on the bucket to apply a Object Lock configuration")
		}
		return putLockConfig(e, c)
	})
}

func validLockConfig(c ObjectLockConfig) error {
	switch {
	case !c.Enabled:
		return errorf(ErrMalformedInput, "ObjectLockEnabled must be Enabled")
	case c.Mode == "" && c.Days == 0 && c.Years == 0:
		return nil
	case c.Mode != LockGovernance && c.Mode != LockCompliance:
		return errorf(ErrMalformedInput, "default retention mode %q is neither GOVERNANCE nor COMPLIANCE", c.Mode)
	case (c.Days != 0) == (c.Years != 0):
		return errorf(ErrMalformedInput, "a default retention needs exactly one of Days and Years")
	case c.Days < 0 || c.Years < 0:
		return errorf(ErrInvalidArgument, "Default retention period must be a positive integer value")
	case c.Days > maxRetentionDays || c.Years > maxRetentionYears:
		return errorf(ErrInvalidArgument, "Default retention period is too large (at most %d days or %d years)", maxRetentionDays, maxRetentionYears)
	}
	return nil
}

// checkVersioningChange refuses to suspend versioning on a bucket with
// object lock.
func checkVersioningChange(b *filer.Entry, status string) error {
	if status != VersioningEnabled && lockConfigOf(b).Enabled {
		return errorf(ErrInvalidBucketState, "An Object Lock configuration is present on this bucket, so the versioning state cannot be changed.")
	}
	return nil
}

// lockedVersion finds version vid ("" the latest) of key in a bucket with
// object lock, for reading or changing its lock.
func (l *Layer) lockedVersion(ctx context.Context, bucket, key, vid string) (*filer.Entry, error) {
	b, err := l.bucketEntry(ctx, bucket)
	if err != nil {
		return nil, err
	}
	if !lockConfigOf(b).Enabled {
		return nil, errorf(ErrInvalidRequest, "Bucket is missing Object Lock Configuration")
	}
	_, e, err := l.readableVersion(ctx, bucket, key, vid)
	return e, err
}

// GetObjectLock returns the lock of version vid ("" the latest) of key.
func (l *Layer) GetObjectLock(ctx context.Context, bucket, key, vid string) (ObjectLock, error) {
	e, err := l.lockedVersion(ctx, bucket, key, vid)
	if err != nil {
		return ObjectLock{}, err
	}
	return lockOf(e), nil
}

// PutObjectRetention sets (mode "" removes) the retention of version vid
// ("" the latest) of key. Extending a retention in the same mode is always
// allowed; any other change of an active GOVERNANCE retention (shorter,
// removed, or another mode: S3 lets nobody alter its lock settings without
// the bypass) needs WithGovernanceBypass, and an active COMPLIANCE
// retention can only be extended.
func (l *Layer) PutObjectRetention(ctx context.Context, bucket, key, vid, mode string, until time.Time) error {
	if err := l.checkRetention(mode, until); err != nil {
		return err
	}
	if mode == "" {
		until = time.Time{}
	}
	return l.modifyLock(ctx, bucket, key, vid, func(e *filer.Entry) error {
		old := lockOf(e)
		if old.Mode != "" && old.RetainUntil.After(l.now()) && !extends(old, mode, until) {
			if old.Mode == LockCompliance || !governanceBypassed(ctx) {
				return errorf(ErrObjectLocked, "the %s retention of version %s until %s can only be extended",
					old.Mode, versionIDOf(e), old.RetainUntil.Format(time.RFC3339))
			}
		}
		setRetention(e, mode, until)
		return nil
	})
}

// extends reports whether the retention (mode, until) keeps old's mode
// and ends no earlier.
func extends(old ObjectLock, mode string, until time.Time) bool {
	return mode == old.Mode && !until.Before(old.RetainUntil)
}

// PutObjectLegalHold sets or clears the legal hold of version vid ("" the
// latest) of key.
func (l *Layer) PutObjectLegalHold(ctx context.Context, bucket, key, vid string, on bool) error {
	return l.modifyLock(ctx, bucket, key, vid, func(e *filer.Entry) error {
		setLegalHold(e, on)
		return nil
	})
}

// modifyLock applies fn to the entry of version vid of key in one
// transaction. A concurrent write may archive the version between the
// lookup and the change (the entry at the path is then another version):
// the lookup is repeated.
func (l *Layer) modifyLock(ctx context.Context, bucket, key, vid string, fn func(e *filer.Entry) error) error {
	errMoved := errors.New("version moved")
	for try := 0; ; try++ {
		e, err := l.lockedVersion(ctx, bucket, key, vid)
		if err != nil {
			return err
		}
		want := versionIDOf(e)
		err = l.ns.ModifyEntry(ctx, e.Path, func(ne *filer.Entry) error {
			if ne.IsDir() != e.IsDir() || versionIDOf(ne) != want || isDeleteMarker(ne) {
				return errMoved
			}
			if ne.Xattrs == nil {
				ne.Xattrs = map[string][]byte{}
			}
			return fn(ne)
		})
		if (errors.Is(err, errMoved) || errors.Is(err, filer.ErrNotFound)) && try < 5 {
			continue
		}
		if errors.Is(err, errMoved) {
			return errorf(ErrNoSuchVersion, "%q version %s", key, vid)
		}
		return nsErr(err, key)
	}
}

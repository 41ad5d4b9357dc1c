package objectapi

import (
	"context"
	"log/slog"
	"time"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/filer"
)

// Namespace is what the object layer needs from the filer; *filer.Filer
// satisfies it. Errors are the filer's (filer.ErrNotFound, ErrExists,
// ErrNotDir, ErrIsDir, ErrNotEmpty, ErrInvalidPath ...). Entries returned
// are the caller's to change. Safe for concurrent use.
type Namespace interface {
	FindEntry(ctx context.Context, p string) (*filer.Entry, error)
	ListEntries(ctx context.Context, dir string, opts filer.ListOptions) ([]*filer.Entry, bool, error)
	CreateEntry(ctx context.Context, e *filer.Entry, opts filer.CreateOptions) error
	UpdateEntry(ctx context.Context, e *filer.Entry) error
	// ModifyEntry changes the entry as it is inside one transaction: for
	// attribute changes to objects that others may be writing.
	ModifyEntry(ctx context.Context, p string, fn func(e *filer.Entry) error) error
	DeleteEntry(ctx context.Context, p string, recursive bool) error
	// Rename moves an entry in one transaction, keeping its chunks;
	// versioning uses it to archive a replaced version without copying.
	Rename(ctx context.Context, from, to string) error
	// Atomically commits the operations fn makes in one transaction;
	// versioning archives the replaced version with the write.
	Atomically(ctx context.Context, fn func(filer.Batch) error) error
	// Blobs is the blob layer: objects are split into chunks uploaded
	// here before their entry is created.
	Blobs() chunk.Blobs
	ChunkSize() int
	// EncryptData says to seal the chunks of objects stored without SSE
	// (encryption at rest, filer --encrypt-data; see docs/security.md).
	EncryptData() bool
}

var _ Namespace = (*filer.Filer)(nil)

// Config configures a Layer.
type Config struct {
	Namespace Namespace // required
	// Root is the directory whose subdirectories are the buckets; "" means
	// "/buckets".
	Root string
	// Concurrency is how many chunks of one upload are written at once; 0
	// means chunk.DefaultConcurrency.
	Concurrency int
	// MinPartSize is the smallest size of a multipart part that is not the
	// last; 0 means 5 MiB, as S3 (tests lower it).
	MinPartSize int64
	Logger      *slog.Logger
	Now         func() time.Time // nil means time.Now
}

// Layer is the S3 object layer over one namespace. Safe for concurrent use.
type Layer struct {
	ns      Namespace
	root    string
	uploads string
	conc    int
	minPart int64
	log     *slog.Logger
	now     func() time.Time
}

// New returns a Layer; it makes sure the root directory exists lazily (on
// the first bucket creation), so New does no I/O.
func New(cfg Config) (*Layer, error) {
	if cfg.Namespace == nil {
		return nil, errorf(ErrInvalidArgument, "Config.Namespace is required")
	}
	root := cfg.Root
	if root == "" {
		root = "/buckets"
	}
	root, err := filer.CleanPath(root)
	if err != nil || root == "/" {
		return nil, errorf(ErrInvalidArgument, "bucket root %q must be a directory below /", cfg.Root)
	}
	if cfg.MinPartSize <= 0 {
		cfg.MinPartSize = 5 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Layer{
		ns: cfg.Namespace, root: root, uploads: root + "/.uploads",
		conc: cfg.Concurrency, minPart: cfg.MinPartSize, log: cfg.Logger, now: cfg.Now,
	}, nil
}

// Root is the directory holding the buckets.
func (l *Layer) Root() string { return l.root }

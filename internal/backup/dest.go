package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Meta is what a backup keeps of an entry besides the content.
type Meta struct {
	Mode  os.FileMode // type and permission bits
	Mtime time.Time
	Size  int64
	Link  string // symlink target
	Attrs *Attrs // nil when the destination keeps none for the entry
}

// State is the backup's position in the source's event log.
type State struct {
	ClusterID string `json:"clusterId"` // the source cluster
	Path      string `json:"path"`      // the source directory backed up
	Seq       uint64 `json:"seq"`       // last event applied
	Updated   string `json:"updated"`
	// Encrypted: the files' content is sealed (see crypt.go); KeyCheck
	// recognises the key without revealing it.
	Encrypted bool   `json:"encrypted,omitempty"`
	KeyCheck  string `json:"keyCheck,omitempty"`
}

// Dest is where a backup lives. Paths are relative to the backed-up
// directory, '/'-separated, without a leading '/'.
type Dest interface {
	LoadState(ctx context.Context) (State, bool, error)
	SaveState(ctx context.Context, st State) error
	// Stat returns the entry at rel, ok false when there is none.
	Stat(ctx context.Context, rel string) (Meta, bool, error)
	Put(ctx context.Context, rel string, m Meta, r io.Reader) error
	Mkdir(ctx context.Context, rel string, m Meta) error
	// Delete removes rel and everything under it; a missing one is fine.
	Delete(ctx context.Context, rel string) error
	Rename(ctx context.Context, from, to string) error
	// Walk calls fn for every entry, parents before children.
	Walk(ctx context.Context, fn func(rel string, m Meta) error) error
	Open(ctx context.Context, rel string) (io.ReadCloser, error)
}

// OpenDest opens a destination given as a directory or s3://bucket/prefix.
func OpenDest(ctx context.Context, spec string, s3cfg S3Config) (Dest, error) {
	if strings.HasPrefix(spec, "s3://") {
		return openS3(ctx, spec, s3cfg)
	}
	if spec == "" {
		return nil, errors.New("backup: no destination")
	}
	d := &dirDest{root: spec, data: filepath.Join(spec, "data")}
	if err := os.MkdirAll(d.data, 0o755); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	return d, nil
}

// dirDest is a local directory: DIR/state.json and the tree under DIR/data,
// files with the entries' permissions and mtimes.
type dirDest struct {
	root, data string
}

func (d *dirDest) local(rel string) string { return filepath.Join(d.data, filepath.FromSlash(rel)) }

func (d *dirDest) LoadState(ctx context.Context) (State, bool, error) {
	b, err := os.ReadFile(filepath.Join(d.root, "state.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, false, nil
	}
	if err != nil {
		return State{}, false, err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return State{}, false, fmt.Errorf("backup: %s: %w", filepath.Join(d.root, "state.json"), err)
	}
	return st, true, nil
}

func (d *dirDest) SaveState(ctx context.Context, st State) error {
	b, _ := json.MarshalIndent(st, "", "  ")
	return writeAtomic(filepath.Join(d.root, "state.json"), 0o644, time.Now(), func(f *os.File) error {
		_, err := f.Write(b)
		return err
	})
}

func (d *dirDest) Stat(ctx context.Context, rel string) (Meta, bool, error) {
	fi, err := os.Lstat(d.local(rel))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return Meta{}, false, nil
	}
	if err != nil {
		return Meta{}, false, err
	}
	return d.meta(rel, fi), true, nil
}

func (d *dirDest) meta(rel string, fi fs.FileInfo) Meta {
	m := Meta{Mode: fi.Mode(), Mtime: fi.ModTime(), Size: fi.Size()}
	if fi.Mode()&os.ModeSymlink != 0 {
		m.Link, _ = os.Readlink(d.local(rel))
		m.Size = 0
	}
	if fi.IsDir() {
		m.Size = 0
	}
	if fi.Mode()&os.ModeSymlink == 0 {
		m.Attrs = localAttrs(d.local(rel))
	}
	return m
}

func (d *dirDest) Put(ctx context.Context, rel string, m Meta, r io.Reader) error {
	p := d.local(rel)
	if err := d.makeParent(p); err != nil {
		return err
	}
	if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	if m.Mode&os.ModeSymlink != 0 {
		os.Remove(p)
		return os.Symlink(m.Link, p)
	}
	return writeAtomic(p, m.Mode.Perm(), m.Mtime, func(f *os.File) error {
		if _, err := io.Copy(f, r); err != nil {
			return err
		}
		return setLocalAttrs(f.Name(), m)
	})
}

// makeParent creates p's parent, replacing a file in the way.
func (d *dirDest) makeParent(p string) error {
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		for q := dir; q != d.data && len(q) > len(d.data); q = filepath.Dir(q) {
			if fi, serr := os.Lstat(q); serr == nil && !fi.IsDir() {
				os.Remove(q)
			}
		}
		return os.MkdirAll(dir, 0o755)
	}
	return nil
}

func (d *dirDest) Mkdir(ctx context.Context, rel string, m Meta) error {
	p := d.local(rel)
	if fi, err := os.Lstat(p); err == nil && !fi.IsDir() {
		os.Remove(p)
	}
	if err := d.makeParent(p); err != nil {
		return err
	}
	if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if err := os.Chmod(p, m.Mode.Perm()|0o700); err != nil { // the backup must stay writable by its owner
		return err
	}
	return setLocalAttrs(p, m)
}

func (d *dirDest) Delete(ctx context.Context, rel string) error {
	if rel == "" {
		return nil
	}
	return os.RemoveAll(d.local(rel))
}

func (d *dirDest) Rename(ctx context.Context, from, to string) error {
	dst := d.local(to)
	if err := d.makeParent(dst); err != nil {
		return err
	}
	if fi, err := os.Lstat(dst); err == nil && fi.IsDir() {
		os.RemoveAll(dst)
	}
	return os.Rename(d.local(from), dst)
}

func (d *dirDest) Walk(ctx context.Context, fn func(rel string, m Meta) error) error {
	return filepath.WalkDir(d.data, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == d.data || strings.HasPrefix(de.Name(), ".kelp-tmp-") {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		fi, err := de.Info()
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, d.data+string(filepath.Separator)))
		return fn(rel, d.meta(rel, fi))
	})
}

func (d *dirDest) Open(ctx context.Context, rel string) (io.ReadCloser, error) {
	return os.Open(d.local(rel))
}

// writeAtomic writes a file through a temporary one renamed over it, so a
// crash leaves the old content or the new, never a part.
func writeAtomic(p string, perm os.FileMode, mtime time.Time, fill func(*os.File) error) error {
	f, err := os.CreateTemp(filepath.Dir(p), ".kelp-tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = fill(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, perm|0o600)
	}
	if err == nil && !mtime.IsZero() {
		err = os.Chtimes(tmp, mtime, mtime)
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

package fsview

import (
	"context"
	"syscall"

	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// FilerClient is the view's connection to its filer, for services kept in
// the filer beside the namespace (the WebDAV lock table).
func (fs *FS) FilerClient() filerpb.FilerClient { return fs.filer }

// FilerPath maps view path p to its filer path.
func (fs *FS) FilerPath(p string) string { return fs.full(p) }

// Root is the filer directory the view shows as "/".
func (fs *FS) Root() string { return fs.cfg.Root }

// PatchXattrs sets and removes extended attributes of p in one filer
// update: all or none (WebDAV PROPPATCH). Removing an unset one is no error.
func (fs *FS) PatchXattrs(ctx context.Context, p string, set map[string][]byte, remove []string) error {
	for k := range set {
		if !visibleXattr(k) {
			return syscall.ENOTSUP
		}
	}
	n, err := fs.resolve(ctx, p)
	if err != nil {
		return err
	}
	_, err = fs.updateContent(ctx, n.contentPath(), n, func(e *filerpb.Entry) error {
		for _, k := range remove {
			delete(e.Xattrs, k)
		}
		for k, v := range set {
			setXattr(e, k, v)
		}
		return nil
	})
	return err
}

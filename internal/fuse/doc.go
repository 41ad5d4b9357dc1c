// Package fuse mounts an fsview.FS with the kernel's FUSE driver, through
// github.com/hanwen/go-fuse/v2 (its inode API): `kelp mount`.
//
// It only translates: go-fuse's tree of inodes gives each request its path
// in the view (a rename moves the inode, so paths follow), the view does
// the work, and fsview.Errno gives the errno. Handles are fsview handles:
// FLUSH (every close(2)) and FSYNC commit the file's buffered writes, so a
// file closed on one mount reads the same when opened on another
// (close-to-open consistency).
//
// The kernel caches names and attributes for Options.CacheTimeout (1s by
// default) and never caches a missing name, so a change made elsewhere
// shows within a second. Permissions are checked by the kernel
// (default_permissions) against the mode, uid and gid the view reports.
//
// Unmount on SIGINT/SIGTERM (ServeUntil) detaches lazily when the mount is
// busy. Imported by internal/cli only.
package fuse

// Package webdav serves an fsview.FS over WebDAV (RFC 4918 classes 1 and
// 2) with golang.org/x/net/webdav as the protocol engine: `kelp webdav`
// and `kelp server --webdav.port`.
//
// fs.go is x/net/webdav's FileSystem over the view: a PUT writes through a
// view handle and answers once the file is committed (durable); COPY reads
// and writes through the view; MOVE is the filer's atomic rename; DELETE of
// a collection is one recursive filer delete. View errors become
// *os.PathError with the errno, which the engine maps to status codes
// (ENOENT 404 or 409, EEXIST 405, ...).
//
// locks.go is the LockSystem: the lock table lives in the filer (filerpb
// DavLock), so locks hold across WebDAV servers of one filer and survive a
// restart of this process. props.go keeps PROPPATCH dead properties as
// user.dav:{ns}name extended attributes. auth.go is the optional basic auth
// (--users). Requests whose path or Destination has a ".." segment (also
// percent-encoded) are
// refused with 400 rather than cleaned into another path. A PUT that
// replaces a file answers 204, a new one 201 (RFC 4918 9.7.1).
//
// Imported by internal/cli only.
package webdav

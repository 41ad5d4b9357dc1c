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

// they hold within one WebDAV process and are gone after its restart.
// Dead properties (PROPPATCH) are not stored: PROPPATCH answers 403 per
// property. Requests whose path or Destination has a ".." segment are
// refused with 400 rather than cleaned into another path. A PUT that
// replaces a file answers 204, a new one 201 (RFC 4918 9.7.1).
//
// Imported by internal/cli only.
package webdav

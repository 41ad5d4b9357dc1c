// Package localread is the short-circuit read between a volume server and a
// reader on the same host (a FUSE mount, a WebDAV gateway): instead of the
// needle's bytes crossing HTTP over loopback (the server copies them out of
// its page cache into a socket, the reader copies them out of the socket),
// the server answers over a Unix socket with where the data lies and a
// read-only descriptor of the volume file (SCM_RIGHTS), and the reader reads
// the bytes from the file with one pread. The server's CPU for a large read
// falls by more than half (docs/volume-server.md).
//
// The socket is an abstract one (Linux): a name outside the file system,
// so a killed server leaves nothing behind, and a mount and a server that
// see different temporary directories (systemd's PrivateTmp) still find
// each other; it is shared by the processes of one network namespace, as
// loopback is.
//
// Who may read: each side checks the other's credentials (SO_PEERCRED): the
// server answers only root or its own user, who can read its data directory
// anyway; the reader trusts only root or its own user, because any local
// user can bind a name first. Anything the short-circuit cannot answer
// exactly as the HTTP path would (an erasure-coded volume, a missing or
// deleted needle, a volume on another host) is answered "fall back", and
// the reader uses HTTP: errors keep a single source.
//
// The wire: a request is one line, "FID OFF N\n" (N -1: to the end). The
// answer is a 4-byte big-endian length, a JSON Header of that length and,
// for a needle the server already holds in memory, Header.Inline bytes of
// data; a large needle's answer carries the volume file's descriptor.
package localread

import "os"

// SocketPath is the name of the abstract Unix socket where the volume
// server that clients know as addr ("host:port", its public URL) answers
// local reads (Go's "@" prefix). The name holds the address, which is
// unique in a cluster, so that a reader never takes the socket of another
// server for the one it looks for.
func SocketPath(addr string) string { return "@kelp-volume-" + addr }

// Header describes the bytes an answer gives.
type Header struct {
	// Fallback: use the HTTP path for this read.
	Fallback bool `json:"fallback,omitempty"`
	// Size is the needle's whole data size.
	Size int64 `json:"size"`
	// FileOff is the offset of the data's first byte in the descriptor sent.
	FileOff int64 `json:"file_off,omitempty"`
	// Inline is how many data bytes follow the header (the range asked for,
	// of a needle the server read whole); 0 with a descriptor.
	Inline int64 `json:"inline,omitempty"`
	// CRC is the CRC-32C of the whole data (needle.CRC).
	CRC     uint32 `json:"crc"`
	ETag    string `json:"etag,omitempty"`
	Mime    string `json:"mime,omitempty"`
	Name    string `json:"name,omitempty"`
	ModTime int64  `json:"mtime,omitempty"` // unix seconds
}

// trusted reports whether the process at the other end of c is root or runs
// as this process's user.
func trusted(uid uint32, ok bool) bool {
	return ok && (uid == 0 || uid == uint32(os.Geteuid()))
}

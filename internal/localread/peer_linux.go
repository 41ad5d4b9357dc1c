package localread

import (
	"net"
	"syscall"
)

// supported: the short-circuit needs SO_PEERCRED.
const supported = true

// peerUID is the user id of the process at the other end of c.
func peerUID(c *net.UnixConn) (uint32, bool) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, false
	}
	var cred *syscall.Ucred
	if cerr := rc.Control(func(fd uintptr) {
		cred, err = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); cerr != nil || err != nil {
		return 0, false
	}
	return cred.Uid, true
}

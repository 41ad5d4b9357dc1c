package fsview

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Errno turns any error of this package into the POSIX error a file system
// call reports. Errors that already are an errno pass through; the filer's
// gRPC codes map as filer.proto documents them; anything else (a volume
// server or the filer unreachable) is EIO.
func Errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return syscall.ETIMEDOUT
	}
	if errors.Is(err, context.Canceled) {
		return syscall.EINTR
	}
	st, ok := status.FromError(err)
	if !ok {
		return syscall.EIO
	}
	msg := st.Message()
	switch st.Code() {
	case codes.NotFound:
		return syscall.ENOENT
	case codes.AlreadyExists:
		return syscall.EEXIST
	case codes.InvalidArgument:
		return syscall.EINVAL
	case codes.FailedPrecondition:
		// One gRPC code for three filer errors: the message tells them apart.
		switch {
		case strings.Contains(msg, "not empty"):
			return syscall.ENOTEMPTY
		case strings.Contains(msg, "is a directory"):
			return syscall.EISDIR
		case strings.Contains(msg, "not a directory"):
			return syscall.ENOTDIR
		}
		return syscall.EPERM
	case codes.ResourceExhausted:
		return syscall.ENOSPC
	case codes.DeadlineExceeded:
		return syscall.ETIMEDOUT
	case codes.Canceled:
		// The call's context was cancelled (the gRPC error does not wrap
		// context.Canceled): the caller gave up, the call was interrupted.
		return syscall.EINTR
	}
	return syscall.EIO
}

// errnof wraps an errno with context for logs; Errno still finds it.
func errnof(en syscall.Errno, format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), en)
}

// Errno is the package's Errno, and logs the error behind an EIO: EIO is
// the answer for what the view did not expect (an unreachable server, a
// filer error without an errno), and the errno alone says nothing of why.
func (fs *FS) Errno(err error) syscall.Errno {
	en := Errno(err)
	if en == syscall.EIO {
		fs.log.Warn("fsview: answering EIO", "err", err)
	}
	return en
}

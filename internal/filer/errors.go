package filer

import "errors"

var (
	// ErrNotFound: no entry at the path (or one of its parents).
	ErrNotFound = errors.New("filer: no such file or directory")
	// ErrExists: an entry is already at the path and the call would not replace it.
	ErrExists = errors.New("filer: entry exists")
	// ErrNotDir: a path component, or the target of a directory operation, is not a directory.
	ErrNotDir = errors.New("filer: not a directory")
	// ErrIsDir: a file operation was aimed at a directory.
	ErrIsDir = errors.New("filer: is a directory")
	// ErrNotEmpty: the directory has entries and the call was not recursive.
	ErrNotEmpty = errors.New("filer: directory not empty")
	// ErrInvalidPath: the path breaks the rules in the package doc. Wrapped with the reason.
	ErrInvalidPath = errors.New("filer: invalid path")
	// ErrInvalid: an operation that can never succeed as asked (moving a
	// directory into itself, renaming the root, changing an entry's type).
	ErrInvalid = errors.New("filer: invalid operation")
	// ErrCorrupt: a stored entry or event does not decode.
	ErrCorrupt = errors.New("filer: corrupt metadata")
	// ErrEventsTrimmed: events a subscriber asked for were deleted after the
	// retention period (Config.EventRetention).
	ErrEventsTrimmed = errors.New("filer: events trimmed")
	// ErrQuotaExceeded: the change would make a directory quota's bytes or
	// entries grow past its limit (see SetQuota). Nothing was changed.
	ErrQuotaExceeded = errors.New("filer: quota exceeded")
	// ErrChanged: a conditional change found the entry changed since the
	// caller read it (its ctime differs). Nothing was changed.
	ErrChanged = errors.New("filer: entry changed since it was read")
	// ErrClosed: the Filer was closed.
	ErrClosed = errors.New("filer: closed")
	// ErrStore: the metadata store failed. A write that fails with it may
	// or may not have been committed (a connection can break while COMMIT's
	// answer is on its way): whatever the change refers to must be kept.
	ErrStore = errors.New("filer: store")
)

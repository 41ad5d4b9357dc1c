// Package crtime gives out creation times that no two entries made by one
// process share. A file's creation time is its identity where nothing else
// is: a mount numbers inodes by it (fsview's inoOfEntry), because a rename
// keeps it and a new file at the same path does not share it. Two entries
// made in one transaction (the directories a/ and a/b/ that a PUT of a/b/c
// creates, the entries of one batch) used to get the same time, and so the
// same inode number: to the kernel, a/b was a/ again (ELOOP, and a mount
// walking that loop ran out of memory).
package crtime

import (
	"sync/atomic"
	"time"
)

var last atomic.Int64 // the last time given out, unix nanoseconds

// Unique returns now, or, if this process already gave out a time at or
// after it, the nanosecond after the last one given out.
func Unique(now time.Time) time.Time {
	for {
		l := last.Load()
		n := max(now.UnixNano(), l+1)
		if last.CompareAndSwap(l, n) {
			return time.Unix(0, n)
		}
	}
}

package filerserver

// Deadlock detection for fcntl record locks (POSIX: F_SETLKW fails with
// EDEADLK when waiting would deadlock). The lock table keeps, for every
// owner blocked in a SET_WAIT, which owners hold the locks it waits on; a
// new wait that would close a cycle of such edges is refused instead of
// waiting forever. flock locks are not checked, as on Linux.

// lockHolder is one lock owner: a process (fcntl) of one mount session.
type lockHolder struct {
	session string
	owner   uint64
}

func holderOf(l plock) lockHolder { return lockHolder{l.session, l.owner} }

// waitsFor records that w waits on a lock of h (counted: several threads
// of one process may wait at once).
func (t *posixLocks) waitsFor(w, h lockHolder) {
	if t.waiting == nil {
		t.waiting = map[lockHolder]map[lockHolder]int{}
	}
	if t.waiting[w] == nil {
		t.waiting[w] = map[lockHolder]int{}
	}
	t.waiting[w][h]++
}

// doneWaiting removes one waitsFor(w, h).
func (t *posixLocks) doneWaiting(w, h lockHolder) {
	if t.waiting[w][h]--; t.waiting[w][h] <= 0 {
		delete(t.waiting[w], h)
		if len(t.waiting[w]) == 0 {
			delete(t.waiting, w)
		}
	}
}

// deadlock reports whether w waiting on a lock of h would close a cycle:
// h, or an owner h waits for, and so on, waits for w.
func (t *posixLocks) deadlock(w, h lockHolder) bool {
	seen := map[lockHolder]bool{}
	next := []lockHolder{h}
	for len(next) > 0 {
		x := next[len(next)-1]
		next = next[:len(next)-1]
		if x == w {
			return true
		}
		if seen[x] {
			continue
		}
		seen[x] = true
		for y := range t.waiting[x] {
			next = append(next, y)
		}
	}
	return false
}

package volumeserver

import (
	"errors"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/localread"
)

// startLocalReads answers reads from processes on this host (a mount, a
// WebDAV gateway) on a Unix socket, with the volume file's descriptor
// instead of the bytes over HTTP (internal/localread). A socket that cannot
// be made only leaves the short-circuit off: every reader falls back to
// HTTP by itself.
func (s *Server) startLocalReads() {
	if s.cfg.NoLocalReads {
		return
	}
	rec := s.metrics.HTTPOp("volume", "local_read", http.StatusOK)
	lookup := func(f string, off, n int64) (localread.Answer, bool) {
		start := time.Now()
		rec.Start()
		a, ok := s.localRead(f, off, n)
		done := a.Done
		a.Done = func() {
			if done != nil {
				done()
			}
			rec.Done(time.Since(start), servedBytes(a.Header.Size, off, n, ok))
		}
		return a, ok
	}
	srv, err := localread.Listen(localread.SocketPath(s.cfg.PublicURL), lookup, s.log)
	if err != nil {
		s.log.Info("local reads off", "err", err)
		return
	}
	s.mu.Lock()
	s.local = srv
	s.mu.Unlock()
	go srv.Serve()
}

// localRead answers a local read of needle f, as the HTTP path would: ok
// false (HTTP then answers, errors included) for what it does not serve.
func (s *Server) localRead(f string, off, n int64) (localread.Answer, bool) {
	id, err := fid.Parse(f)
	if err != nil {
		return localread.Answer{}, false
	}
	v, ok := s.store.Volume(id.Volume)
	if !ok { // erasure-coded or elsewhere
		return localread.Answer{}, false
	}
	obj, err := v.Read(id.Key, id.Cookie)
	if err != nil {
		return localread.Answer{}, false
	}
	h := localread.Header{Size: obj.Size, CRC: obj.DataCRC(), ETag: obj.ETag, Mime: obj.Meta.Mime,
		Name: obj.Meta.Name, ModTime: obj.ModTime.Unix()}
	if data := obj.Bytes(); data != nil {
		obj.Close()
		if off > int64(len(data)) {
			return localread.Answer{}, false
		}
		end := int64(len(data))
		if n >= 0 {
			end = min(end, off+n)
		}
		return localread.Answer{Header: h, Data: data[off:end]}, true
	}
	file, dataOff, _ := obj.File()
	ro, err := reopenReadOnly(file)
	obj.Close()
	if err != nil {
		return localread.Answer{}, false
	}
	h.FileOff = dataOff
	return localread.Answer{Header: h, File: ro, Done: func() { ro.Close() }}, true
}

// reopenReadOnly opens f's file again, read-only: the volume holds its data
// file open for writing, and a reader is given only the right to read.
// Through /proc/self/fd, the same file even if a vacuum has replaced it
// under its name meanwhile. Not for the in-memory file system of tests.
func reopenReadOnly(f any) (*os.File, error) {
	sc, ok := f.(syscall.Conn)
	if !ok {
		return nil, errors.New("not an OS file")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var ro *os.File
	var oerr error
	if err := rc.Control(func(fd uintptr) {
		ro, oerr = os.Open("/proc/self/fd/" + strconv.Itoa(int(fd)))
	}); err != nil {
		return nil, err
	}
	return ro, oerr
}

// servedBytes is how many bytes a local read gave, for the metrics.
func servedBytes(size, off, n int64, ok bool) int64 {
	if !ok || off >= size {
		return 0
	}
	if n < 0 || off+n > size {
		return size - off
	}
	return n
}

// stopLocalReads closes the socket (Close, Crash).
func (s *Server) stopLocalReads() {
	s.mu.Lock()
	l := s.local
	s.local = nil
	s.mu.Unlock()
	if l != nil {
		l.Close()
	}
}

package auth

import (
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// ReloadInterval is how often a key or tokens file given by path is checked
// for a change (its size and modification time): a change is picked up by
// the first request after at most this long, without a restart.
var ReloadInterval = time.Second

// watched is a file re-read when it changes. A read that fails (the file
// missing, half-written, invalid) keeps what was loaded before and is
// logged without the file's content.
type watched struct {
	path string
	load func(body []byte) error // applies a new version; returns an error to keep the old one

	mu      sync.Mutex
	stamp   string
	checked time.Time
	failed  string // stamp of the version that failed last, logged once
}

func statStamp(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d/%d", st.Size(), st.ModTime().UnixNano()), nil
}

// init loads the file for the first time: an error here is the caller's.
func (w *watched) init() error {
	stamp, err := statStamp(w.path)
	if err != nil {
		return err
	}
	body, err := os.ReadFile(w.path)
	if err != nil {
		return err
	}
	if err := w.load(body); err != nil {
		return err
	}
	w.stamp, w.checked = stamp, time.Now()
	return nil
}

// refresh re-reads the file when ReloadInterval passed since the last
// check and it changed.
func (w *watched) refresh() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if now.Sub(w.checked) < ReloadInterval {
		return
	}
	w.checked = now
	stamp, err := statStamp(w.path)
	if err != nil || stamp == w.stamp {
		if err != nil && w.failed != "stat" {
			w.failed = "stat"
			slog.Warn("auth: cannot check for a new version; keeping the loaded one", "file", w.path, "err", err)
		}
		return
	}
	body, err := os.ReadFile(w.path)
	if err == nil {
		err = w.load(body)
	}
	if err != nil {
		if w.failed != stamp {
			w.failed = stamp
			slog.Warn("auth: new version refused; keeping the loaded one", "file", w.path, "err", err)
		}
		return
	}
	w.stamp, w.failed = stamp, ""
	slog.Info("auth: reloaded", "file", w.path)
}

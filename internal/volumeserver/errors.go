package volumeserver

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/erasure"
	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/store"
	"github.com/kelpfs/kelp/internal/volume"
)

// clientError is a mistake in the request itself.
type clientError struct {
	status int
	msg    string
}

func (e *clientError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &clientError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

func errTooLarge(size, limit int64) error {
	return &clientError{http.StatusRequestEntityTooLarge,
		fmt.Sprintf("upload of %d bytes exceeds the limit of %d bytes", size, limit)}
}

// statusTable is the one place where domain errors become HTTP statuses.
// Order matters only where one error wraps another.
var statusTable = []struct {
	err    error
	status int
}{
	{volume.ErrNotFound, http.StatusNotFound},
	{volume.ErrDeleted, http.StatusNotFound},
	{volume.ErrCookieMismatch, http.StatusNotFound},
	{store.ErrNotFound, http.StatusNotFound},
	{volume.ErrTooLarge, http.StatusRequestEntityTooLarge},
	{needle.ErrTooLarge, http.StatusRequestEntityTooLarge},
	{volume.ErrReadOnly, http.StatusConflict},
	{volume.ErrFull, http.StatusInsufficientStorage},
	{volume.ErrNoSpace, http.StatusInsufficientStorage},
	{volume.ErrShortBody, http.StatusBadRequest}, // the client sent less than it announced
	{io.ErrUnexpectedEOF, http.StatusBadRequest},
	{volume.ErrBroken, http.StatusServiceUnavailable},
	{ErrNotEnoughCopies, http.StatusServiceUnavailable},
	{ErrShortWriteUnrecorded, http.StatusServiceUnavailable},
	// No master answers (a lookup of a volume's copies): the cluster's
	// state, not a bug here; the write may succeed later.
	{client.ErrNoMaster, http.StatusServiceUnavailable},
	{client.ErrNoAnswer, http.StatusServiceUnavailable},
	{erasure.ErrTooFewShards, http.StatusServiceUnavailable},
	// An EC volume switched to its decoded volume under a delete: the
	// client retries, and the lookup names the decoded volume.
	{erasure.ErrSealed, http.StatusServiceUnavailable},
	{volume.ErrClosed, http.StatusServiceUnavailable},
	{store.ErrClosed, http.StatusServiceUnavailable},
}

func statusOf(err error) int {
	var ce *clientError
	if errors.As(err, &ce) {
		return ce.status
	}
	var re *errReplica
	if errors.As(err, &re) {
		return http.StatusServiceUnavailable // this copy may have written; the client retries elsewhere
	}
	for _, e := range statusTable {
		if errors.Is(err, e.err) {
			return e.status
		}
	}
	return http.StatusInternalServerError
}

// writeDomainError answers with the status of err; server-side failures are logged.
func (s *Server) writeDomainError(w http.ResponseWriter, r *http.Request, err error) {
	status := statusOf(err)
	if status >= 500 && status != http.StatusInsufficientStorage {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if status == http.StatusInsufficientStorage || status == http.StatusConflict {
		s.notifyChange() // let the master know at once that this volume takes no more writes
	}
	writeError(w, status, err.Error())
}

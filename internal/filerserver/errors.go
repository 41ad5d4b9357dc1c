package filerserver

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/filer"
)

// errBadRequest marks a request the handler itself refuses (bad query
// parameter, missing multipart file).
var errBadRequest = errors.New("filerserver: bad request")

// errorCodes is the one table from domain errors to HTTP and gRPC codes.
// Anything not in it is a server-side failure: 500 / Internal, logged.
var errorCodes = []struct {
	err  error
	http int
	grpc codes.Code
}{
	{filer.ErrInvalidPath, http.StatusBadRequest, codes.InvalidArgument},
	{filer.ErrInvalid, http.StatusBadRequest, codes.InvalidArgument},
	{errBadRequest, http.StatusBadRequest, codes.InvalidArgument},
	{filer.ErrNotFound, http.StatusNotFound, codes.NotFound},
	{filer.ErrExists, http.StatusConflict, codes.AlreadyExists},
	{filer.ErrNotEmpty, http.StatusConflict, codes.FailedPrecondition},
	{filer.ErrIsDir, http.StatusConflict, codes.FailedPrecondition},
	{filer.ErrNotDir, http.StatusConflict, codes.FailedPrecondition},
	{filer.ErrChanged, http.StatusPreconditionFailed, codes.FailedPrecondition},
	// A directory quota is full: 507 Insufficient Storage, ENOSPC through a mount.
	{filer.ErrQuotaExceeded, http.StatusInsufficientStorage, codes.ResourceExhausted},
	{filer.ErrEventsTrimmed, http.StatusGone, codes.OutOfRange},
	{context.Canceled, 499, codes.Canceled}, // the client went away
	{context.DeadlineExceeded, http.StatusGatewayTimeout, codes.DeadlineExceeded},
	// The cluster cannot take the write now (no master, a silent volume
	// server): the request may succeed later, so 503 rather than 500.
	{client.ErrNoMaster, http.StatusServiceUnavailable, codes.Unavailable},
	{client.ErrNoAnswer, http.StatusServiceUnavailable, codes.Unavailable},
}

func classify(err error) (int, codes.Code, bool) {
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			return c.http, c.grpc, true
		}
	}
	// A volume server that cannot be reached (a name that no longer
	// resolves, a refused or cut connection) is the cluster's state, not
	// the client's mistake nor a bug here: the write may succeed later.
	var ne net.Error
	if errors.As(err, &ne) {
		return http.StatusServiceUnavailable, codes.Unavailable, true
	}
	// A master or volume server said it cannot place or store the data
	// ("replication 100 needs 2 data centers ..."): pass that on as it is.
	var he *client.HTTPError
	if errors.As(err, &he) {
		switch he.Status {
		case http.StatusServiceUnavailable:
			return he.Status, codes.Unavailable, true
		case http.StatusInsufficientStorage:
			return he.Status, codes.ResourceExhausted, true
		}
	}
	return http.StatusInternalServerError, codes.Internal, false
}

// writeError answers {"error": ...} with the status from the table and
// logs server-side failures with their cause.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code, _, known := classify(err)
	if !known {
		s.log.Error("filer request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	} else {
		s.log.Debug("filer request refused", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// grpcError converts a filer error for a gRPC answer, logging failures.
func grpcError(log *slog.Logger, op string, err error) error {
	if err == nil {
		return nil
	}
	_, code, known := classify(err)
	if !known {
		log.Error("filer gRPC call failed", "op", op, "err", err)
	}
	return status.Error(code, err.Error())
}

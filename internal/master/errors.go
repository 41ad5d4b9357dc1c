package master

import (
	"errors"
	"net/http"

	"google.golang.org/grpc/codes"

	"github.com/kelpfs/kelp/internal/consensus"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/topology"
	"github.com/kelpfs/kelp/internal/ttl"
)

var (
	// ErrBadRequest marks a client's mistake in parameters.
	ErrBadRequest = errors.New("master: bad request")
	// ErrGrowthFailed: a volume could be placed but no server allocated it.
	ErrGrowthFailed = errors.New("master: volume growth failed")
	// ErrLeaderUnreachable: this master is a follower and could not forward
	// the request to the leader.
	ErrLeaderUnreachable = errors.New("master: leader unreachable")
)

// errorTable is the one mapping from domain errors to HTTP and gRPC codes;
// the first match wins, anything else is an internal error.
var errorTable = []struct {
	err  error
	http int
	grpc codes.Code
}{
	{ErrBadRequest, http.StatusBadRequest, codes.InvalidArgument},
	{replication.ErrInvalid, http.StatusBadRequest, codes.InvalidArgument},
	{ttl.ErrInvalid, http.StatusBadRequest, codes.InvalidArgument},
	{fid.ErrMalformed, http.StatusBadRequest, codes.InvalidArgument},
	{topology.ErrVolumeNotFound, http.StatusNotFound, codes.NotFound},
	{topology.ErrNoPlacement, http.StatusServiceUnavailable, codes.Unavailable},
	{topology.ErrNoWritableVolume, http.StatusServiceUnavailable, codes.Unavailable},
	{ErrGrowthFailed, http.StatusServiceUnavailable, codes.Unavailable},
	{topology.ErrBehindCopy, http.StatusConflict, codes.FailedPrecondition},
	{consensus.ErrNotLeader, http.StatusServiceUnavailable, codes.Unavailable},
	{ErrLeaderUnreachable, http.StatusServiceUnavailable, codes.Unavailable},
	{consensus.ErrLocked, http.StatusConflict, codes.FailedPrecondition},
	{consensus.ErrNotLockOwner, http.StatusConflict, codes.FailedPrecondition},
}

func httpStatus(err error) int {
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			return e.http
		}
	}
	return http.StatusInternalServerError
}

func grpcCode(err error) codes.Code {
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			return e.grpc
		}
	}
	return codes.Internal
}

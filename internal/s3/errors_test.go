package s3

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/kelpfs/kelp/internal/client"
)

// A cluster that cannot take a request now (no master, a volume server that
// cannot be reached or answers 503) is a 503 ServiceUnavailable, which the
// SDKs retry, never an InternalError.
func TestClusterUnavailableIs503(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("assign: %w", client.ErrNoMaster),
		fmt.Errorf("upload: %w", &net.DNSError{Err: "no such host", Name: "v3", IsNotFound: true}),
		fmt.Errorf("upload: %w", &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("connection refused")}),
		fmt.Errorf("assign: %w", &client.HTTPError{Method: "GET", URL: "http://m1/dir/assign", Status: http.StatusServiceUnavailable}),
	} {
		if got := toAPIError(err); got.Status != http.StatusServiceUnavailable || got.Code != "ServiceUnavailable" {
			t.Errorf("toAPIError(%v) = %s %d, want ServiceUnavailable 503", err, got.Code, got.Status)
		}
	}
	if got := toAPIError(fmt.Errorf("read: %w", context.DeadlineExceeded)); got.Status != http.StatusBadRequest {
		t.Errorf("a deadline = %s %d, want RequestTimeout 400", got.Code, got.Status)
	}
}

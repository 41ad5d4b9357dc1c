package filerserver

import (
	"fmt"
	"net"
	"net/http"
	"testing"
)

// A volume server the filer cannot reach makes a write fail for now, not
// for good: 503, so clients retry, never a 500 (the docker test saw 500 for
// a volume server whose name stopped resolving).
func TestUnreachableVolumeServerIs503(t *testing.T) {
	for _, err := range []error{
		&net.DNSError{Err: "no such host", Name: "v3", IsNotFound: true},
		&net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("connection refused")},
	} {
		wrapped := fmt.Errorf("client: upload 3,01ab: %w", err)
		if code, _, known := classify(wrapped); code != http.StatusServiceUnavailable || !known {
			t.Errorf("classify(%v) = %d (known %v), want 503", wrapped, code, known)
		}
	}
}

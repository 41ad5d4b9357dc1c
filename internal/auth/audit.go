package auth

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Audit writes one JSON line per authenticated mutating request (and per
// refused one): who, what, when, from where, and the answer's status. A nil
// *Audit logs nothing. Tokens are never written, only the identity's name.
type Audit struct {
	mu sync.Mutex
	w  io.Writer
	c  io.Closer
}

// Event is one audit record.
type Event struct {
	Time    time.Time `json:"time"`
	Service string    `json:"service"`        // master, filer, volume, s3
	Who     string    `json:"who"`            // identity name; "" when unauthenticated
	Role    string    `json:"role,omitempty"` // ro, rw
	Remote  string    `json:"remote"`         // client address
	Action  string    `json:"action"`         // HTTP method, "grpc"
	Target  string    `json:"target"`         // path, gRPC method, bucket/key
	Status  int       `json:"status"`         // HTTP status (gRPC codes mapped)
	Detail  string    `json:"detail,omitempty"`
}

// OpenAudit opens the audit log: "" none, "-" standard output, else a file
// appended to (mode 0600).
func OpenAudit(path string) (*Audit, error) {
	switch path {
	case "":
		return nil, nil
	case "-":
		return &Audit{w: os.Stdout}, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return &Audit{w: f, c: f}, nil
}

// NewAudit logs to w (tests).
func NewAudit(w io.Writer) *Audit { return &Audit{w: w} }

// Log writes e (its Time set to now when zero).
func (a *Audit) Log(e Event) {
	if a == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	b = append(b, '\n')
	a.mu.Lock()
	a.w.Write(b)
	a.mu.Unlock()
}

// Close closes the file.
func (a *Audit) Close() error {
	if a == nil || a.c == nil {
		return nil
	}
	return a.c.Close()
}

// Package security holds what every Kelp process shares to talk securely: the
// TLS settings (certificate, key and CA files, re-read when they change), the
// security configuration file that sets any command's flags, and the
// generation of a small CA and certificates (`kelp certs`, `kelp server --secure`).
//
// TLS is process-wide: the command line loads it once (SetProcess) and every
// listener (pb.Listen, the S3 and WebDAV gateways, Raft) and every client
// (pb.DialOptions, client.NewHTTPClient, URL) takes it from Process. A nil
// *TLS means plain TCP and every method of it is safe to call.
//
// Which ports ask for a client certificate, when a CA is configured:
//   - gRPC ports and Raft (server to server, and the tools: shell, mount,
//     filer.sync, benchmark): a client certificate signed by the CA is required.
//   - HTTP ports of master, volume server and filer: a client certificate is
//     asked for and checked when given, but not required; callers without one
//     are left to the API's own authentication (401/403).
//   - S3 and WebDAV (ports for end users): no client certificate.
//
// Every process presents its own certificate as client certificate when it dials.
package security

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Files are the TLS settings, paths of PEM files: the flags tls.cert, tls.key
// and tls.ca.
type Files struct {
	Cert string // this process's certificate (chain), used as server and client certificate
	Key  string // its private key
	CA   string // CA certificates peers are verified with; empty: the system's roots and no client certificates
}

// Enabled reports whether TLS is asked for.
func (f Files) Enabled() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

// Mode says how a listener treats client certificates (see the package comment).
type Mode int

const (
	// Peer ports (gRPC, Raft) require a client certificate signed by the CA
	// when one is configured.
	Peer Mode = iota
	// ClusterHTTP ports verify a client certificate when one is given.
	ClusterHTTP
	// Public ports (S3, WebDAV) ask for none.
	Public
)

// TLS is a loaded TLS configuration. The certificate and key are re-read on
// the next handshake after either file changed (a failed read keeps the
// previous pair, so a half-written rotation never breaks serving).
type TLS struct {
	files Files
	pool  *x509.CertPool // nil: system roots

	mu    sync.Mutex
	cert  *tls.Certificate
	stamp string // size and modification time of both files when cert was read
}

// Load reads the files and checks them. Cert and Key must be given together.
func Load(f Files) (*TLS, error) {
	if (f.Cert == "") != (f.Key == "") {
		return nil, errors.New("tls: --tls.cert and --tls.key go together: give both")
	}
	if f.Cert == "" {
		return nil, errors.New("tls: --tls.cert and --tls.key are required when --tls.ca is given")
	}
	t := &TLS{files: f}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("tls.ca: %w", err)
		}
		t.pool = x509.NewCertPool()
		if !t.pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.ca: %s holds no PEM certificate", f.CA)
		}
	}
	if _, err := t.certificate(); err != nil {
		return nil, err
	}
	return t, nil
}

// Files are the files t was loaded from.
func (t *TLS) Files() Files {
	if t == nil {
		return Files{}
	}
	return t.files
}

func fileStamp(paths ...string) (string, error) {
	var b bytes.Buffer
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%d/%d;", st.Size(), st.ModTime().UnixNano())
	}
	return b.String(), nil
}

// certificate returns the current pair, re-reading the files if they changed.
func (t *TLS) certificate() (*tls.Certificate, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	stamp, err := fileStamp(t.files.Cert, t.files.Key)
	if err == nil && stamp == t.stamp && t.cert != nil {
		return t.cert, nil
	}
	if err == nil {
		var c tls.Certificate
		if c, err = tls.LoadX509KeyPair(t.files.Cert, t.files.Key); err == nil {
			t.cert, t.stamp = &c, stamp
			return t.cert, nil
		}
	}
	if t.cert != nil {
		return t.cert, nil // keep serving with the previous pair
	}
	return nil, fmt.Errorf("tls: %w", err)
}

// ServerConfig is the configuration of a listener in mode m.
func (t *TLS) ServerConfig(m Mode) *tls.Config {
	if t == nil {
		return nil
	}
	c := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return t.certificate()
		},
	}
	if t.pool != nil {
		c.ClientCAs = t.pool
		switch m {
		case Peer:
			c.ClientAuth = tls.RequireAndVerifyClientCert
		case ClusterHTTP:
			c.ClientAuth = tls.VerifyClientCertIfGiven
		}
	}
	return c
}

// ClientConfig is the configuration of every dial: servers are verified
// against the CA (or the system's roots) and this process's own certificate
// is offered as client certificate.
func (t *TLS) ClientConfig() *tls.Config {
	if t == nil {
		return nil
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    t.pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return t.certificate()
		},
	}
}

// Listen wraps ln so that it serves TLS in mode m; with t nil it returns ln.
func (t *TLS) Listen(ln net.Listener, m Mode) net.Listener {
	if t == nil {
		return ln
	}
	// The records of one large response write leave in few large writes
	// (gather.go).
	return tls.NewListener(gatherListener{ln}, t.ServerConfig(m))
}

// Dial connects to addr over TCP, then TLS when t is not nil.
func (t *TLS) Dial(addr string, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	if t == nil {
		return d.Dial("tcp", addr)
	}
	return tls.DialWithDialer(d, "tcp", addr, t.ClientConfig())
}

var process atomic.Pointer[TLS]

// SetProcess makes t this process's TLS configuration (nil: plain TCP).
func SetProcess(t *TLS) { process.Store(t) }

// Process is this process's TLS configuration; nil when TLS is off.
func Process() *TLS { return process.Load() }

// Scheme is "https" when this process uses TLS, else "http".
func Scheme() string {
	if Process() != nil {
		return "https"
	}
	return "http"
}

// URL is the base URL of a Kelp server at hostport ("host:port"), with the
// scheme this process uses. Every Kelp URL is built here or from Scheme.
func URL(hostport string) string { return Scheme() + "://" + hostport }

// ApplyClient fills in a TLS client configuration another library made
// (a database driver's, from its own connection string): roots, when true,
// replaces the roots with tls.ca (when one is configured), and this
// process's certificate is offered as client certificate unless c already
// has one. A nil t or c changes nothing.
func (t *TLS) ApplyClient(c *tls.Config, roots bool) {
	if t == nil || c == nil {
		return
	}
	if roots && t.pool != nil {
		c.RootCAs = t.pool
	}
	if len(c.Certificates) == 0 && c.GetClientCertificate == nil {
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return t.certificate()
		}
	}
}

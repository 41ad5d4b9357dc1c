package security

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Validity of what this file generates.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	CertValidity = 2 * 365 * 24 * time.Hour
)

// CA is a certificate authority loaded from or written to a directory.
type CA struct {
	Cert     *x509.Certificate
	Key      crypto.Signer
	CertFile string
	KeyFile  string
}

// LoadOrCreateCA returns the CA in dir (ca.crt, ca.key), creating it when
// neither file exists.
func LoadOrCreateCA(dir string) (*CA, bool, error) {
	ca := &CA{CertFile: filepath.Join(dir, "ca.crt"), KeyFile: filepath.Join(dir, "ca.key")}
	_, errC := os.Stat(ca.CertFile)
	_, errK := os.Stat(ca.KeyFile)
	if errC == nil && errK == nil {
		cert, key, err := readPair(ca.CertFile, ca.KeyFile)
		if err != nil {
			return nil, false, fmt.Errorf("CA in %s: %w", dir, err)
		}
		ca.Cert, ca.Key = cert, key
		return ca, false, nil
	}
	if !errors.Is(errC, os.ErrNotExist) || !errors.Is(errK, os.ErrNotExist) {
		return nil, false, fmt.Errorf("CA in %s: only one of ca.crt and ca.key exists", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, false, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "Kelp CA " + now.UTC().Format("2006-01-02 15:04:05"), Organization: []string{"Kelp"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, false, err
	}
	if ca.Cert, err = x509.ParseCertificate(der); err != nil {
		return nil, false, err
	}
	ca.Key = key
	if err := writePair(ca.CertFile, ca.KeyFile, der, key); err != nil {
		return nil, false, err
	}
	return ca, true, nil
}

// Issue writes certFile and keyFile: a new key and a certificate signed by
// ca for the given hosts (names and IP addresses), valid as server and as
// client certificate.
func (ca *CA) Issue(certFile, keyFile, commonName string, hosts []string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: commonName, Organization: []string{"Kelp"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(CertValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return err
	}
	return writePair(certFile, keyFile, der, key)
}

// covers reports whether the certificate in certFile was signed by ca, is
// valid for another day at least and names every host.
func (ca *CA) covers(certFile string, hosts []string) bool {
	pemBytes, err := os.ReadFile(certFile)
	if err != nil {
		return false
	}
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return false
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil || cert.CheckSignatureFrom(ca.Cert) != nil || time.Until(cert.NotAfter) < 24*time.Hour {
		return false
	}
	for _, h := range hosts {
		if h != "" && cert.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

// Secure is what `kelp server --secure` keeps in its data directory.
type Secure struct {
	Dir    string // <data>/security
	Files  Files  // CA, the server's certificate and key (also its client certificate)
	Config string // a security configuration file naming them, for the tools (shell, mount, ...)
	// Created lists the files written by this call (empty when all were reused).
	Created []string
}

// EnsureSecure creates, on first start, a CA and a certificate for hosts
// (plus localhost, 127.0.0.1 and ::1) in dir, and a security configuration
// file naming them; later starts reuse them. A certificate that does not name
// every host, or expires within a day, is issued again from the same CA.
//
// It is the one place `--secure` generates material: more (signing keys,
// tokens) can be added here and to the configuration file it writes.
func EnsureSecure(dir string, hosts []string) (*Secure, error) {
	s := &Secure{Dir: dir, Config: filepath.Join(dir, "security.toml")}
	ca, created, err := LoadOrCreateCA(dir)
	if err != nil {
		return nil, err
	}
	if created {
		s.Created = append(s.Created, ca.CertFile, ca.KeyFile)
	}
	s.Files = Files{CA: ca.CertFile, Cert: filepath.Join(dir, "server.crt"), Key: filepath.Join(dir, "server.key")}
	all := []string{"localhost", "127.0.0.1", "::1"}
	for _, h := range hosts {
		if h != "" && !slices.Contains(all, h) {
			all = append(all, h)
		}
	}
	if _, err := os.Stat(s.Files.Key); err != nil || !ca.covers(s.Files.Cert, all) {
		if err := ca.Issue(s.Files.Cert, s.Files.Key, "kelp server", all); err != nil {
			return nil, err
		}
		s.Created = append(s.Created, s.Files.Cert, s.Files.Key)
	}
	if _, err := os.Stat(s.Config); err != nil {
		if err := os.WriteFile(s.Config, []byte(ConfigText(s.Files)), 0o600); err != nil {
			return nil, err
		}
		s.Created = append(s.Created, s.Config)
	}
	return s, nil
}

// ConfigText is a security configuration file setting f.
func ConfigText(f Files) string {
	return fmt.Sprintf("# Kelp security configuration: keys are flag names (see docs/security.md).\n"+
		"[tls]\ncert = %q\nkey = %q\nca = %q\n", f.Cert, f.Key, f.CA)
}

// CertsFor writes, into dir, a CA (reused when present) and for each host a
// certificate and key (host.crt, host.key) naming it, plus client.crt and
// client.key for the tools. It returns the files written.
func CertsFor(dir string, hosts []string) ([]string, error) {
	ca, created, err := LoadOrCreateCA(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	if created {
		out = append(out, ca.CertFile, ca.KeyFile)
	}
	for _, h := range append(slices.Clone(hosts), "client") {
		name := strings.NewReplacer(":", "_", "/", "_").Replace(h)
		certFile, keyFile := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
		names := []string{h}
		if h == "client" {
			names = nil
		}
		if err := ca.Issue(certFile, keyFile, h, names); err != nil {
			return out, err
		}
		out = append(out, certFile, keyFile)
	}
	return out, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

// writePair writes a certificate (0644) and its key (0600), each through a
// temporary file renamed into place, so a reloading reader never sees half a file.
func writePair(certFile, keyFile string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeAtomic(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return err
	}
	return writeAtomic(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readPair(certFile, keyFile string) (*x509.Certificate, crypto.Signer, error) {
	cb, err := os.ReadFile(certFile)
	if err != nil {
		return nil, nil, err
	}
	kb, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, err
	}
	cblock, _ := pem.Decode(cb)
	kblock, _ := pem.Decode(kb)
	if cblock == nil || kblock == nil {
		return nil, nil, errors.New("not PEM")
	}
	cert, err := x509.ParseCertificate(cblock.Bytes)
	if err != nil {
		return nil, nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(kblock.Bytes)
	if err != nil {
		return nil, nil, err
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, nil, errors.New("the key cannot sign")
	}
	return cert, signer, nil
}

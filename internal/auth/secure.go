package auth

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Secrets are the keys `kelp server --secure` keeps in its data directory.
type Secrets struct {
	SigningKey     string // --jwt.signing.key
	SigningKeyFile string // the file holding it, for --jwt.signing.key=@FILE (re-read when it changes)
	AdminToken     string // read-write access token, named "admin"
	TokensFile     string // the --access.tokens file holding AdminToken
	AdminTokenFile string // the admin token alone, for --access.token=@FILE
}

// LoadOrCreateSecrets generates the secrets under dir/security on the first
// start and loads them after. Every file is mode 0600, the directory 0700.
func LoadOrCreateSecrets(dir string) (Secrets, error) {
	sd := filepath.Join(dir, "security")
	if err := os.MkdirAll(sd, 0o700); err != nil {
		return Secrets{}, fmt.Errorf("secure: %w", err)
	}
	var s Secrets
	var err error
	s.SigningKeyFile = filepath.Join(sd, "jwt-signing.key")
	if s.SigningKey, err = loadOrCreate(s.SigningKeyFile); err != nil {
		return Secrets{}, err
	}
	s.AdminTokenFile = filepath.Join(sd, "admin.token")
	if s.AdminToken, err = loadOrCreate(s.AdminTokenFile); err != nil {
		return Secrets{}, err
	}
	s.TokensFile = filepath.Join(sd, "access-tokens")
	if _, err := os.Stat(s.TokensFile); errors.Is(err, fs.ErrNotExist) {
		body := "# NAME ROLE TOKEN (roles: ro, rw); read by --access.tokens\nadmin rw " + s.AdminToken + "\n"
		if err := writeSecret(s.TokensFile, body); err != nil {
			return Secrets{}, err
		}
	} else if err != nil {
		return Secrets{}, fmt.Errorf("secure: %w", err)
	}
	return s, nil
}

func loadOrCreate(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		v := strings.TrimSpace(string(b))
		if v == "" {
			return "", fmt.Errorf("secure: %s is empty", path)
		}
		return v, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("secure: %w", err)
	}
	v := NewToken()
	if err := writeSecret(path, v+"\n"); err != nil {
		return "", err
	}
	return v, nil
}

// writeSecret writes a new file with mode 0600, atomically.
func writeSecret(path, body string) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("secure: %w", err)
	}
	_, err = f.WriteString(body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("secure: %w", err)
	}
	return nil
}

package master

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/crypto/bcrypt"

	"github.com/kelpfs/kelp/internal/consensus"
)

// AdminCredentialFile is the file in MetaDir where the master that
// generated the admin UI's credential keeps its password (mode 0600).
const AdminCredentialFile = "admin-credentials.json"

// adminCredentialUser is the user of a generated credential.
const adminCredentialUser = "admin"

type storedCredential struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

// AdminCredential is the admin UI credential committed through Raft, the
// same on every master; zero while none was generated.
func (s *Server) AdminCredential() consensus.AdminCredential {
	return s.cons.State().AdminCredential
}

// ensureAdminCredential generates the cluster's admin UI credential when
// Config asks for one and the cluster has none. Only its bcrypt hash goes
// through Raft; the password is written to MetaDir before the commit, so a
// committed credential always has its password on disk. An attempt whose
// commit failed is retried with the same password; one that lost to another
// master's removes its file.
func (s *Server) ensureAdminCredential(ctx context.Context) error {
	if s.cfg.GenerateAdminCredential == nil {
		return nil
	}
	// A new leader may not have applied the log yet: a barrier first.
	if err := s.cons.WaitLeader(ctx); err != nil || s.AdminCredential().Hash != "" {
		return err
	}
	file := filepath.Join(s.cfg.MetaDir, AdminCredentialFile)
	c, err := pendingCredential(file)
	if err != nil {
		return err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(c.Password), bcrypt.DefaultCost)
	if err != nil {
		return fmt.Errorf("hash the admin password: %w", err)
	}
	won, err := s.cons.InitAdminCredential(ctx, consensus.AdminCredential{User: c.User, Hash: string(hash), CreatedBy: s.httpAddr})
	if err != nil {
		return err
	}
	if !won {
		if s.AdminCredential().CreatedBy != s.httpAddr {
			os.Remove(file) // another master's came first; this one is void
		}
		return nil
	}
	s.log.Info("admin UI credential generated and committed; its password is in "+file, "user", c.User)
	s.cfg.GenerateAdminCredential(c.User, c.Password, file)
	return nil
}

// pendingCredential reads the password of an earlier attempt, or makes a
// new one and writes it (0600, through a temporary file and a rename).
func pendingCredential(file string) (storedCredential, error) {
	var c storedCredential
	b, err := os.ReadFile(file)
	switch {
	case err == nil:
		if json.Unmarshal(b, &c) == nil && c.User != "" && c.Password != "" {
			return c, nil
		}
	case !errors.Is(err, fs.ErrNotExist):
		return c, fmt.Errorf("read %s: %w", file, err)
	}
	p := make([]byte, 12)
	rand.Read(p)
	c = storedCredential{User: adminCredentialUser, Password: hex.EncodeToString(p)}
	b, _ = json.MarshalIndent(c, "", "  ")
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return c, fmt.Errorf("write the admin password: %w", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		return c, fmt.Errorf("write the admin password: %w", err)
	}
	return c, nil
}

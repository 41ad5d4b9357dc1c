package cli

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/kelpfs/kelp/internal/adminui"
	"github.com/kelpfs/kelp/internal/master"
)

// adminFlags are the admin web UI's credentials (docs/admin-ui.md), the
// same flags on `kelp master` and `kelp server`.
type adminFlags struct {
	user, password string
	filer          string
	// filerAddr, when set, names the filer instead of --admin.filer
	// (`kelp server`: its own filer, known once it is created).
	filerAddr func() string
	// filerToken is the access token the UI shows that filer (`kelp
	// server` under access tokens: one of its own); "" none.
	filerToken string
}

func (f *adminFlags) addFlags(fl *pflag.FlagSet) {
	fl.StringVar(&f.user, "admin.user", "", "admin web UI user (or env KELP_ADMIN_USER; default admin when a password is given)")
	fl.StringVar(&f.filer, "admin.filer", "", "filer HTTP host:port for the admin UI's filer browser and buckets pages (kelp server: its own filer)")
	fl.StringVar(&f.password, "admin.password", "", "admin web UI password (or env KELP_ADMIN_PASSWORD); without one, kelp server generates one into --dir, kelp master's first leader one for all masters (printed once, kept in its --mdir)")
}

// adminCredentialsFile holds the generated UI credentials under --dir.
const adminCredentialsFile = "admin-credentials.json"

// credentials resolves the UI's user and password: flags, else the
// environment, else (keyDir not "") a pair generated once and stored in
// keyDir. ok is false when the UI stays off.
func (f *adminFlags) credentials(keyDir string, out io.Writer) (user, password string, ok bool, err error) {
	user, password = f.user, f.password
	if user == "" && password == "" {
		user, password = os.Getenv("KELP_ADMIN_USER"), os.Getenv("KELP_ADMIN_PASSWORD")
	}
	if password == "" && user != "" {
		return "", "", false, errors.New("admin UI: a user without a password; give --admin.password or KELP_ADMIN_PASSWORD")
	}
	if password != "" {
		if user == "" {
			user = "admin"
		}
		return user, password, true, nil
	}
	if keyDir == "" {
		return "", "", false, nil
	}
	user, password, err = storedAdminCredentials(filepath.Join(keyDir, adminCredentialsFile), out)
	return user, password, err == nil, err
}

func storedAdminCredentials(path string, out io.Writer) (string, string, error) {
	var c struct {
		User     string `json:"user"`
		Password string `json:"password"`
	}
	created, err := loadOrCreateSecret(path, &c, func() bool { return c.User != "" && c.Password != "" }, func() {
		p := make([]byte, 12)
		rand.Read(p)
		c.User, c.Password = "admin", hex.EncodeToString(p)
	})
	switch {
	case err != nil:
		return "", "", fmt.Errorf("admin UI: %w", err)
	case created:
		fmt.Fprintf(out, "  admin UI credentials generated and stored in %s:\n    user %s\n    password %s\n", path, c.User, c.Password)
	default:
		fmt.Fprintf(out, "  admin UI credentials from %s (user %s)\n", path, c.User)
	}
	return c.User, c.Password, nil
}

// mountAdminUI sets cfg.AdminUI to build the UI over the master. Without
// credentials (flags, environment, or keyDir's generated pair), the masters
// share one the first leader generates and commits through Raft (its
// password printed to out once, by that master, and kept in its MetaDir).
func (f *adminFlags) mountAdminUI(cfg *master.Config, log *slog.Logger, keyDir string, out io.Writer) error {
	user, password, ok, err := f.credentials(keyDir, out)
	if err != nil {
		return err
	}
	var fromCluster func(m *master.Server) func() (string, string)
	if !ok {
		log.Info("admin UI: no --admin.user/--admin.password; the masters use the credential the first leader generates (its password is printed by that master and kept in its --mdir/" + master.AdminCredentialFile + ")")
		cfg.GenerateAdminCredential = func(user, password, file string) {
			fmt.Fprintf(out, "  admin UI credentials generated for the whole cluster and stored in %s:\n    user %s\n    password %s\n", file, user, password)
		}
		fromCluster = func(m *master.Server) func() (string, string) {
			return func() (string, string) { c := m.AdminCredential(); return c.User, c.Hash }
		}
	}
	cfg.AdminUI = func(m *master.Server) http.Handler {
		filer := f.filerAddr
		if filer == nil {
			filer = func() string { return f.filer }
		}
		ucfg := adminui.Config{User: user, Password: password, Source: m, Logger: log, Filer: filer, FilerToken: f.filerToken}
		if fromCluster != nil {
			ucfg.Credential = fromCluster(m)
		}
		ui, err := adminui.New(ucfg)
		if err != nil { // only without credentials, excluded above
			log.Error("admin UI off", "err", err)
			return http.NotFoundHandler()
		}
		return ui
	}
	return nil
}

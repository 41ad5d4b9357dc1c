package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/spf13/pflag"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/master"
	"github.com/kelpfs/kelp/internal/shell"
)

// authFlags are the authentication flags of the servers (master, volume,
// filer, server): signed file ids, access tokens, the audit log; see
// docs/security.md. A key flag's value may be "@FILE" to read it from
// FILE (keeps it out of ps and shell history).
type authFlags struct {
	signingKey   string
	readKey      string
	expires      time.Duration
	accessTokens string
	accessToken  string
	auditLog     string
}

// addFlags registers the flags; tokens: also --access.tokens (servers with
// an API to protect: master, filer, server); client: also --access.token.
func (f *authFlags) addFlags(fl *pflag.FlagSet, tokens, client bool) {
	fl.StringVar(&f.signingKey, "jwt.signing.key", "", "secret key signing file ids: volume servers refuse writes and deletes without a token from assign (same value on masters, volume servers, filers; @FILE reads it from FILE: one key a line, at most two, the first signs, both verify; re-read when the file changes)")
	fl.StringVar(&f.readKey, "jwt.signing.read.key", "", "secret key signing reads: volume servers refuse reads without a token (@FILE reads it from FILE, as --jwt.signing.key)")
	fl.DurationVar(&f.expires, "jwt.expires", auth.DefaultExpiry, "lifetime of a file token")
	fl.StringVar(&f.auditLog, "audit.log", "", "audit log of authenticated mutating requests, JSON lines: a file, or - for stdout")
	if tokens {
		fl.StringVar(&f.accessTokens, "access.tokens", "", "file of access tokens, one \"NAME ROLE TOKEN\" a line (ROLE ro or rw): the API then needs Authorization: Bearer TOKEN; re-read when the file changes")
	}
	if client {
		addAccessTokenFlag(fl, &f.accessToken)
	}
}

// addAccessTokenFlag registers a client's --access.token.
func addAccessTokenFlag(fl *pflag.FlagSet, v *string) {
	fl.StringVar(v, "access.token", "", "access token shown to filers and masters that need one (@FILE reads it from FILE; env KELP_ACCESS_TOKEN)")
}

// authSetup is what the flags resolve to.
type authSetup struct {
	signer, readSigner *auth.Signer
	access             *auth.Access
	audit              *auth.Audit
	token              string // this process's own access token as a client
}

func (f *authFlags) setup() (authSetup, error) {
	var a authSetup
	var err error
	if a.signer, err = signerFromFlag("--jwt.signing.key", f.signingKey, f.expires); err != nil {
		return a, err
	}
	if a.readSigner, err = signerFromFlag("--jwt.signing.read.key", f.readKey, f.expires); err != nil {
		return a, err
	}
	if a.token, err = clientToken(f.accessToken); err != nil {
		return a, err
	}
	if a.access, err = auth.NewAccess(f.accessTokens, a.signer); err != nil {
		return a, err
	}
	if a.audit, err = auth.OpenAudit(f.auditLog); err != nil {
		return a, err
	}
	return a, nil
}

// signerFromFlag resolves a key flag: "@FILE" is a key file (one or two
// keys, the first signs; re-read when it changes, see auth.NewSignerFile),
// anything else the key itself, "" no signer.
func signerFromFlag(name, v string, expires time.Duration) (*auth.Signer, error) {
	if file, ok := strings.CutPrefix(v, "@"); ok {
		s, err := auth.NewSignerFile(file, expires)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return s, nil
	}
	return auth.NewSigner(v, expires), nil
}

// applyMaster sets the master's security; with authentication on, the
// master's own shell (the automatic EC rebuild, the admin UI's
// maintenance) shows the server token, else the master's --access.token,
// else a token of its own that only this master takes (a follower passes
// its shell's token on to the leader, which would refuse that one).
func (a authSetup) applyMaster(cfg *master.Config) {
	cfg.Signer, cfg.ReadSigner, cfg.Access, cfg.Audit = a.signer, a.readSigner, a.access, a.audit
	cfg.AccessToken = a.token
	if a.access == nil {
		return
	}
	var creds grpc.DialOption
	switch {
	case a.signer.Enabled():
		// The server token: volume servers and masters in other
		// processes, which do not know this master's tokens, take it too.
		creds = auth.DialOption(a.signer.ServerToken)
	case a.token != "":
		creds = auth.DialOption(auth.Static(a.token))
	default:
		tok := auth.NewToken()
		a.access.Add(tok, "master-ec-rebuild", auth.RoleWrite)
		creds = auth.DialOption(auth.Static(tok))
	}
	cfg.RunShell = func(ctx context.Context, addr, owner string, out io.Writer, script string) error {
		sh, err := shell.New(shell.Config{Masters: []string{addr}, Out: out, Owner: owner,
			DialOptions: []grpc.DialOption{creds}})
		if err != nil {
			return err
		}
		defer sh.Close()
		return sh.RunScript(ctx, strings.NewReader(script))
	}
}

// internalToken returns a fresh read-write token accepted as name, for a
// gateway inside this process reaching its filer; "" when the filer needs
// none.
func (a authSetup) internalToken(name string) string {
	if a.access == nil {
		return ""
	}
	tok := auth.NewToken()
	a.access.Add(tok, name, auth.RoleWrite)
	return tok
}

// applySecure is `kelp server --secure`'s authentication part: the JWT
// signing key and an admin access token are generated under dir on the
// first start (files mode 0600, see auth.LoadOrCreateSecrets) and loaded
// after, unless given by flags. The admin token is in
// dir/security/admin.token: kelp shell --access.token=@dir/security/admin.token.
func (f *authFlags) applySecure(dir string, out io.Writer) error {
	s, err := auth.LoadOrCreateSecrets(dir)
	if err != nil {
		return err
	}
	if f.signingKey == "" {
		f.signingKey = "@" + s.SigningKeyFile // re-read when it changes: rotation without a restart
	}
	if f.accessTokens == "" {
		f.accessTokens = s.TokensFile
	}
	fmt.Fprintf(out, "  security: signed file ids on; admin access token in %s\n", s.AdminTokenFile)
	return nil
}

// clientToken resolves --access.token (or KELP_ACCESS_TOKEN).
func clientToken(v string) (string, error) {
	if v == "" {
		v = os.Getenv("KELP_ACCESS_TOKEN")
	}
	t, err := auth.TokenFromFlag(v)
	if err != nil {
		return "", fmt.Errorf("--access.token: %w", err)
	}
	return t, nil
}

package cli

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kelpfs/kelp/internal/security"
)

// securityFlags are every command's security settings: --security.config
// (a file whose keys are flag names, see security.ApplyConfigFile) and TLS.
type securityFlags struct {
	config string
	tls    security.Files
}

func (s *securityFlags) addFlags(fl *pflag.FlagSet) {
	fl.StringVar(&s.config, security.ConfigFlag, "", "security configuration file (TOML, or YAML if *.yaml/*.yml): its keys are flag names (tls.cert, ...), setting the flags not given on the command line; see docs/security.md")
	fl.StringVar(&s.tls.Cert, "tls.cert", "", "TLS: this process's certificate (PEM), served on every port and presented as client certificate; re-read when it changes")
	fl.StringVar(&s.tls.Key, "tls.key", "", "TLS: the private key of --tls.cert (PEM)")
	fl.StringVar(&s.tls.CA, "tls.ca", "", "TLS: CA certificates (PEM) servers are verified with; servers then require a client certificate it signed on gRPC and Raft ports (mutual TLS)")
}

// apply reads the configuration file into cmd's flags, then loads TLS for
// the whole process. It runs before every command.
func (s *securityFlags) apply(cmd *cobra.Command) error {
	if s.config != "" {
		if err := security.ApplyConfigFile(s.config, cmd.Flags()); err != nil {
			return err
		}
	}
	return s.load()
}

// load makes s.tls the process's TLS configuration (none when no file is given).
func (s *securityFlags) load() error {
	if !s.tls.Enabled() {
		security.SetProcess(nil)
		return nil
	}
	t, err := security.Load(s.tls)
	if err != nil {
		return err
	}
	security.SetProcess(t)
	return nil
}

package cli

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/kelpfs/kelp/internal/security"
)

// newCertsCommand is `kelp certs`: a small CA and certificates for a test
// or a first cluster.
func newCertsCommand() *cobra.Command {
	var dir, hosts string
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Create a CA and a certificate per host (and client.crt for the tools) for TLS between Kelp processes",
		Long: `Create, in --dir, a CA (ca.crt, ca.key; reused when present) and, for each of --hosts, a
certificate and key (HOST.crt, HOST.key) naming that host, valid as server and client certificate,
plus client.crt/client.key for the tools (shell, mount, benchmark). Give each server its own pair
with --tls.cert/--tls.key and every process --tls.ca=ca.crt. Keep ca.key off the servers. See
docs/security.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			list := splitList(hosts)
			if dir == "" || len(list) == 0 {
				return errors.New("--dir and --hosts are required")
			}
			files, err := security.CertsFor(dir, list)
			if err != nil {
				return fmt.Errorf("certs: %w", err)
			}
			out := cmd.OutOrStdout()
			for _, f := range files {
				fmt.Fprintln(out, "wrote", f)
			}
			fmt.Fprintf(out, "\na security configuration for %s:\n\n%s", list[0], security.ConfigText(security.Files{
				Cert: filepath.Join(dir, list[0]+".crt"), Key: filepath.Join(dir, list[0]+".key"), CA: filepath.Join(dir, "ca.crt")}))
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory for the CA and the certificates")
	cmd.Flags().StringVar(&hosts, "hosts", "", "comma-separated host names and IP addresses, one certificate each")
	return cmd
}

package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kelpfs/kelp/internal/kms"
)

// kmsFlags locate the key service of server-side encryption: its
// directory and its master key.
type kmsFlags struct {
	dir           string
	masterKeyFile string
}

func (f *kmsFlags) addFlags(fl *pflag.FlagSet) {
	fl.StringVar(&f.dir, "kms.dir", "", "directory of the SSE key service's keys (default DIR/kms)")
	fl.StringVar(&f.masterKeyFile, "kms.master-key-file", "", "file holding the KMS master key (32 bytes as 64 hex digits or base64; or env KELP_KMS_MASTER_KEY); "+
		"default DIR/kms/master.key, generated on first start")
}

// masterKeyEnv names the environment variable holding the master key.
const masterKeyEnv = "KELP_KMS_MASTER_KEY"

// open opens the key service under dataDir (or --kms.dir). The master key
// comes from --kms.master-key-file, else KELP_KMS_MASTER_KEY, else
// KMSDIR/master.key, which is generated (mode 0600) when absent; what was
// used is printed to out. With neither a directory nor a data directory
// there is no key service (nil).
func (f *kmsFlags) open(dataDir string, out io.Writer) (*kms.Service, error) {
	dir := f.dir
	if dir == "" {
		if dataDir == "" {
			return nil, nil
		}
		dir = filepath.Join(dataDir, "kms")
	}
	var master []byte
	var err error
	switch env := os.Getenv(masterKeyEnv); {
	case f.masterKeyFile != "":
		if master, err = kms.MasterKeyFile(f.masterKeyFile); err != nil {
			return nil, fmt.Errorf("kms: master key: %w", err)
		}
		fmt.Fprintf(out, "  kms master key from %s\n", f.masterKeyFile)
	case env != "":
		if master, err = kms.ParseMasterKey(env); err != nil {
			return nil, fmt.Errorf("kms: %s: %w", masterKeyEnv, err)
		}
		fmt.Fprintf(out, "  kms master key from $%s\n", masterKeyEnv)
	default:
		path := filepath.Join(dir, "master.key")
		var created bool
		if master, created, err = kms.EnsureMasterKey(path); err != nil {
			return nil, fmt.Errorf("kms: master key: %w", err)
		}
		if created {
			fmt.Fprintf(out, "  kms master key generated and stored in %s (keep a copy elsewhere: without it, SSE-S3 and SSE-KMS objects cannot be read)\n", path)
		} else {
			fmt.Fprintf(out, "  kms master key from %s\n", path)
		}
	}
	return kms.Open(dir, master)
}

// newKMSCommand is `kelp kms`: the keys of SSE-KMS, managed in the key
// directory of a server (running or not: a running gateway sees changes
// at its next request).
func newKMSCommand() *cobra.Command {
	f := &kmsFlags{}
	var dir string
	cmd := &cobra.Command{
		Use:   "kms",
		Short: "Manage the keys of server-side encryption with KMS keys (SSE-KMS)",
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&dir, "dir", "./data", "data directory of the kelp server (or kelp s3) whose keys to manage")
	f.addFlags(pf)
	open := func(cmd *cobra.Command) (*kms.Service, error) {
		return f.open(dir, cmd.ErrOrStderr())
	}
	printJSON := func(cmd *cobra.Command, v any) {
		b, _ := json.MarshalIndent(v, "", "  ")
		fmt.Fprintln(cmd.OutOrStdout(), string(b))
	}
	var alias, desc string
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a key (prints it as JSON)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := open(cmd)
			if err != nil {
				return err
			}
			k, err := s.Create(alias, desc)
			if err != nil {
				return err
			}
			printJSON(cmd, k)
			return nil
		},
	}
	create.Flags().StringVar(&alias, "alias", "", "alias of the key (alias/NAME or NAME)")
	create.Flags().StringVar(&desc, "description", "", "description of the key")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the keys",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := open(cmd)
			if err != nil {
				return err
			}
			keys, err := s.List()
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tALIAS\tSTATE\tCREATED\tDESCRIPTION")
			for _, k := range keys {
				state := "Enabled"
				if !k.Enabled {
					state = "Disabled"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.ID, k.Alias, state, k.Created.Format("2006-01-02T15:04:05Z"), k.Description)
			}
			return tw.Flush()
		},
	}
	oneKey := func(use, short string, fn func(s *kms.Service, ref string) (kms.KeyInfo, error)) *cobra.Command {
		return &cobra.Command{
			Use:   use + " KEY",
			Short: short + " (KEY: id, alias/NAME or ARN)",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				s, err := open(cmd)
				if err != nil {
					return err
				}
				k, err := fn(s, args[0])
				if errors.Is(err, kms.ErrNotFound) {
					return fmt.Errorf("kms: no key %q", args[0])
				}
				if err != nil {
					return err
				}
				printJSON(cmd, k)
				return nil
			},
		}
	}
	cmd.AddCommand(create, list,
		oneKey("describe", "Describe a key", func(s *kms.Service, ref string) (kms.KeyInfo, error) { return s.Describe(ref) }),
		oneKey("enable", "Enable a key", func(s *kms.Service, ref string) (kms.KeyInfo, error) { return s.SetEnabled(ref, true) }),
		oneKey("disable", "Disable a key: objects under it can be neither written nor read until it is enabled again",
			func(s *kms.Service, ref string) (kms.KeyInfo, error) { return s.SetEnabled(ref, false) }),
	)
	return cmd
}

package cli

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/objectapi"
	"github.com/kelpfs/kelp/internal/s3"
	"github.com/kelpfs/kelp/internal/security"
)

// s3Flags are the flags of the S3 gateway: `kelp s3` registers them with no
// prefix, `kelp server` with "s3." (--s3.port, --s3.access-key, ...).
type s3Flags struct {
	addr       addrFlags
	port       int
	domains    string
	idFile     string
	accessKey  string
	secretKey  string
	bucketRoot string
	region     string
	kms        kmsFlags
}

func (f *s3Flags) addFlags(fl *pflag.FlagSet, prefix string) {
	fl.IntVar(&f.port, prefix+"port", 8333, "S3 gateway HTTP port")
	fl.StringVar(&f.domains, prefix+"domain", "", "domains for virtual-hosted-style requests (bucket.domain), comma-separated")
	fl.StringVar(&f.idFile, prefix+"config", "", "identity file (JSON: access keys, secret keys and allowed actions), re-read when it changes")
	fl.StringVar(&f.accessKey, prefix+"access-key", "", "access key of an admin identity (or env KELP_ACCESS_KEY)")
	fl.StringVar(&f.secretKey, prefix+"secret-key", "", "secret key of that identity (or env KELP_SECRET_KEY)")
	fl.StringVar(&f.bucketRoot, prefix+"bucket-root", "/buckets", "filer directory whose subdirectories are the buckets")
	fl.StringVar(&f.region, prefix+"region", "us-east-1", "region reported by GetBucketLocation (requests signed for any region are accepted)")
	f.kms.addFlags(fl)
}

// storedKeys is the key pair file written under --dir on first start.
const storedKeysFile = "s3-credentials.json"

// config builds the gateway configuration over namespace ns. Identities
// come from --access-key/--secret-key, else KELP_ACCESS_KEY/KELP_SECRET_KEY,
// plus --config; with none of these and a keyDir, a key pair is generated
// on first start, stored in keyDir and printed to out (later starts reuse
// it), so that the endpoint is never open by accident.
func (f *s3Flags) config(log *slog.Logger, ns objectapi.Namespace, keyDir string, out io.Writer) (s3.Config, error) {
	bind, err := f.addr.bindIP()
	if err != nil {
		return s3.Config{}, err
	}
	cfg := s3.Config{
		IP: f.addr.ip, BindIP: bind, Port: f.port, Namespace: ns, BucketRoot: f.bucketRoot,
		Domains: splitList(f.domains), Region: f.region, ConfigFile: f.idFile, Logger: log,
		// The keys made in the admin UI (docs/admin-ui.md).
		SharedIdentities: s3.SharedIdentitiesPath,
	}
	ak, sk := f.accessKey, f.secretKey
	if ak == "" && sk == "" {
		ak, sk = os.Getenv("KELP_ACCESS_KEY"), os.Getenv("KELP_SECRET_KEY")
	}
	if (ak == "") != (sk == "") {
		return cfg, errors.New("s3: give both an access key and a secret key")
	}
	if ak == "" && f.idFile == "" {
		if keyDir == "" {
			return cfg, errors.New("s3: no credentials: give --access-key and --secret-key, KELP_ACCESS_KEY and KELP_SECRET_KEY, or --config")
		}
		if ak, sk, err = storedKeys(filepath.Join(keyDir, storedKeysFile), out); err != nil {
			return cfg, err
		}
	}
	if ak != "" {
		cfg.Identities = []s3.Identity{{Name: "admin", Credentials: []s3.Credential{{AccessKey: ak, SecretKey: sk}}, Actions: []string{"Admin"}}}
	}
	if f.idFile != "" {
		if _, err := s3.LoadIdentityFile(f.idFile); err != nil {
			return cfg, err
		}
	}
	if cfg.KMS, err = f.kms.open(keyDir, out); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// storedKeys reads the key pair in path, or generates and stores one.
func storedKeys(path string, out io.Writer) (string, string, error) {
	var c s3.Credential
	created, err := loadOrCreateSecret(path, &c, func() bool { return c.AccessKey != "" && c.SecretKey != "" }, func() {
		a, s := make([]byte, 10), make([]byte, 20)
		rand.Read(a)
		rand.Read(s)
		c = s3.Credential{AccessKey: "KELP" + hex.EncodeToString(a)[:16], SecretKey: hex.EncodeToString(s)}
	})
	switch {
	case err != nil:
		return "", "", fmt.Errorf("s3: %w", err)
	case created:
		fmt.Fprintf(out, "  s3 credentials generated and stored in %s:\n    access key %s\n    secret key %s\n", path, c.AccessKey, c.SecretKey)
	default:
		fmt.Fprintf(out, "  s3 credentials from %s (access key %s)\n", path, c.AccessKey)
	}
	return c.AccessKey, c.SecretKey, nil
}

// newS3Command is `kelp s3`: a gateway with its own embedded filer (the
// filer's store is --dir, or PostgreSQL/Redis via --filer.store to share
// the namespace with other filers) over the cluster of --master.
func newS3Command(g *globalFlags) *cobra.Command {
	f := &s3Flags{}
	ff := &filerFlags{}
	af := &authFlags{}
	var dir string
	var mx metricsFlags
	cmd := &cobra.Command{
		Use:   "s3",
		Short: "Run an S3 gateway (with an embedded filer) over a cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			ff.addr, ff.dir = f.addr, filepath.Join(dir, "filer")
			fcfg, err := ff.config(log)
			if err != nil {
				return err
			}
			sec, err := af.setup()
			if err != nil {
				return err
			}
			fcfg.Signer, fcfg.ReadSigner, fcfg.Access, fcfg.Audit, fcfg.AccessToken = sec.signer, sec.readSigner, sec.access, sec.audit, sec.token
			fcfg.Metrics = mx.registry()
			fs, err := filerserver.New(fcfg)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			scfg, err := f.config(log, fs.Filer(), dir, out)
			if err != nil {
				fs.Close()
				return err
			}
			scfg.Audit = sec.audit
			scfg.Metrics = mx.registry()
			gw, err := s3.New(scfg)
			if err != nil {
				fs.Close()
				return err
			}
			fmt.Fprintf(out, "s3 gateway listening on %s (filer %s)\n", gw.URL(), security.URL(fs.Addr()))
			stopMetrics, err := mx.start(scfg.BindIP, out)
			if err != nil {
				gw.Close()
				fs.Close()
				return err
			}
			defer stopMetrics()
			ctx, stop := signalContext()
			defer stop()
			return runAll(ctx, fs, gw)
		},
	}
	fl := cmd.Flags()
	f.addr.addFlags(fl, "gateway")
	fl.StringVar(&ff.masters, "master", "127.0.0.1:9333", "master addresses host:port[,host:port...]")
	fl.StringVar(&dir, "dir", "./s3", "directory of the embedded filer's store and the generated key pair")
	f.addFlags(fl, "")
	ff.addFlags(fl, "filer.")
	af.addFlags(fl, true, true)
	mx.addFlags(fl, 0)
	// The embedded filer's own HTTP API is a by-product: by default on a
	// free port, so that it never collides with a `kelp filer` nearby.
	fl.Lookup("filer.port").DefValue = "0"
	ff.port = 0
	return cmd
}

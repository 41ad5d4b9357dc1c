package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kelpfs/kelp/internal/fsview"
	"github.com/kelpfs/kelp/internal/fuse"
)

// viewFlags choose the filer directory a gateway shows (kelp mount, kelp
// webdav).
type viewFlags struct {
	filer       string
	filerPath   string
	collection  string
	replication string
	cacheDir    string // kelp mount only
	cacheSizeMB int
	accessToken string
}

func (f *viewFlags) addFlags(fl *pflag.FlagSet) {
	addAccessTokenFlag(fl, &f.accessToken)
	fl.StringVar(&f.filer, "filer", "127.0.0.1:8888", "filer address host:port (its HTTP port; gRPC is that + 10000)")
	fl.StringVar(&f.filerPath, "filer.path", "/", "filer directory to show as the root")
	fl.StringVar(&f.collection, "collection", "", "collection of the chunks written (default: the filer's)")
	fl.StringVar(&f.replication, "replication", "", "replication of the chunks written, e.g. 001 (default: the filer's)")
}

// open connects a view of the filer; an unreachable filer is an error
// within 10 seconds.
func (f *viewFlags) open(ctx context.Context, g *globalFlags) (*fsview.FS, error) {
	log, err := g.logger()
	if err != nil {
		return nil, err
	}
	addr, err := fsview.FilerGRPCAddr(f.filer)
	if err != nil {
		return nil, fmt.Errorf("--filer: %w", err)
	}
	tok, err := clientToken(f.accessToken)
	if err != nil {
		return nil, err
	}
	return fsview.New(ctx, fsview.Config{Filer: addr, Root: f.filerPath, Collection: f.collection, AccessToken: tok,
		Replication: f.replication, ConnectTimeout: 10 * time.Second, Logger: log,
		CacheDir: f.cacheDir, CacheSize: int64(f.cacheSizeMB) << 20, DeferDurability: true, AsyncCreate: true})
}

// newMountCommand is `kelp mount`: the filer as a local file system, in
// the foreground until SIGINT/SIGTERM or an unmount from outside.
func newMountCommand(g *globalFlags) *cobra.Command {
	var vf viewFlags
	var dir string
	var allowOther, readOnly, debug, syncClose bool
	var readAheadKB int
	var mountOpts string
	var mx metricsFlags
	cmd := &cobra.Command{
		Use:   "mount [SOURCE DIR [-o opts]]",
		Short: "Mount a filer directory as a POSIX file system (FUSE)",
		Long: `Mount a filer directory as a POSIX file system (FUSE), in the foreground until SIGINT/SIGTERM.

The mount(8) form "kelp mount host:port[/path] DIR -o opt,opt" (what /sbin/mount.kelp, a link
to kelp, is called with for an fstab line of type kelp) takes the options ro, allow_other,
collection=C and replication=XYZ, ignores mount(8)'s generic ones, and returns once the file
system is mounted, leaving the mount running in the background.`,
		Args: cobra.RangeArgs(0, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return mountHelper(cmd, args, mountOpts)
			}
			if vf.cacheDir == "" && cmd.Flags().Changed("cache.size") {
				return errors.New("--cache.size: give --cache.dir too")
			}
			if vf.cacheSizeMB <= 0 {
				return errors.New("--cache.size: must be a positive number of MB")
			}
			if dir == "" {
				return errors.New("--dir: give the mount point")
			}
			ctx, stop := signalContext()
			defer stop()
			v, err := vf.open(ctx, g)
			if err != nil {
				return err
			}
			defer v.Close()
			registerViewMetrics(mx.registry(), v)
			stopMetrics, err := mx.start("", cmd.OutOrStdout())
			if err != nil {
				return err
			}
			defer stopMetrics()
			log, _ := g.logger()
			opts := fuse.Options{Dir: dir, FsName: "kelp:" + vf.filer + vf.filerPath, AllowOther: allowOther,
				ReadOnly: readOnly, Debug: debug, Logger: log, SyncClose: syncClose, ReadAheadKB: readAheadKB}
			if readAheadKB == 0 {
				opts.ReadAheadKB = -1 // 0: keep the kernel's
			}
			fmt.Fprintf(cmd.OutOrStdout(), "mounting %s%s on %s\n", vf.filer, vf.filerPath, dir)
			return fuse.ServeUntil(ctx, v, opts)
		},
	}
	fl := cmd.Flags()
	vf.addFlags(fl)
	fl.StringVar(&dir, "dir", "", "mount point (an existing directory)")
	fl.BoolVar(&allowOther, "allow-other", false, "let other users than the one mounting use the mount (needs user_allow_other in /etc/fuse.conf unless root)")
	fl.BoolVar(&readOnly, "read-only", false, "mount read-only")
	fl.BoolVar(&syncClose, "sync-close", false, "close(2) commits the file before returning (strict close-to-open with other mounts; slower)")
	fl.BoolVar(&debug, "fuse.debug", false, "log every FUSE request")
	fl.IntVar(&readAheadKB, "fuse.readahead", fuse.DefaultReadAheadKB, "the kernel's read-ahead for the mount in KiB (set through sysfs: root only); 0 keeps the kernel's")
	mx.addFlags(fl, 0)
	fl.StringVarP(&mountOpts, "options", "o", "", "mount(8) options, with SOURCE DIR (see above)")
	fl.StringVar(&vf.cacheDir, "cache.dir", "", "local chunk cache directory: chunks read are kept there (and reused after a restart)")
	fl.IntVar(&vf.cacheSizeMB, "cache.size", 1024, "local chunk cache size in MB (with --cache.dir)")
	return cmd
}

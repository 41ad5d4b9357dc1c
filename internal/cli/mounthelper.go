package cli

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// mountHelperName is the name mount(8) runs for an fstab entry of type
// "kelp": a symbolic link to the kelp binary.
const mountHelperName = "mount.kelp"

// helperArgs rewrites a call as mount.kelp into `kelp mount SOURCE DIR ...`.
func helperArgs(args []string) []string {
	if len(args) > 0 && filepath.Base(args[0]) == mountHelperName {
		return append([]string{args[0], "mount"}, args[1:]...)
	}
	return args
}

// mountFlagsOf translates mount(8)'s SOURCE and -o options into the flags of
// the foreground `kelp mount`.
func mountFlagsOf(source, dir, opts string) ([]string, error) {
	filer, root := source, "/"
	if i := strings.IndexByte(source, '/'); i >= 0 {
		filer, root = source[:i], source[i:]
	}
	if !strings.Contains(filer, ":") {
		return nil, fmt.Errorf("source %q: want host:port[/path]", source)
	}
	flags := []string{"mount", "--filer=" + filer, "--filer.path=" + root, "--dir=" + dir}
	for _, o := range strings.Split(opts, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(o), "=")
		switch k {
		case "", "rw", "defaults", "auto", "noauto", "nofail", "_netdev", "user", "nouser", "users",
			"exec", "noexec", "suid", "nosuid", "dev", "nodev", "atime", "noatime", "relatime", "x-systemd.automount":
			// mount(8)'s own, or what the kernel mount already does
		case "ro":
			flags = append(flags, "--read-only")
		case "allow_other":
			flags = append(flags, "--allow-other")
		case "collection", "replication", "security.config": // security.config: TLS for the mount (docs/security.md)
			flags = append(flags, "--"+k+"="+v)
		default:
			if strings.HasPrefix(k, "x-") || strings.HasPrefix(k, "comment") {
				continue
			}
			return nil, fmt.Errorf("-o %s: unknown option", k)
		}
	}
	return flags, nil
}

// mountHelper starts the foreground mount as a background process and
// returns once the file system is mounted, as mount(8) expects of a helper.
// The background process logs to a file named in the output.
func mountHelper(cmd *cobra.Command, args []string, opts string) error {
	if len(args) != 2 {
		return errors.New("mount form: kelp mount SOURCE DIR [-o opts]")
	}
	dir, err := filepath.Abs(args[1])
	if err != nil {
		return err
	}
	flags, err := mountFlagsOf(args[0], dir, opts)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logPath := filepath.Join(os.TempDir(), "kelp-mount-"+strings.ReplaceAll(strings.Trim(dir, "/"), "/", "-")+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	child := exec.Command(self, flags...)
	child.Stdout, child.Stderr = logf, logf
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlive mount(8) and its session
	if err := child.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	deadline := time.After(30 * time.Second)
	for {
		if mounted(dir) {
			fmt.Fprintf(cmd.OutOrStdout(), "kelp mount of %s on %s running as pid %d (log %s)\n", args[0], dir, child.Process.Pid, logPath)
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("kelp mount failed (%v); see %s", err, logPath)
		case <-deadline:
			child.Process.Signal(syscall.SIGTERM)
			return fmt.Errorf("kelp mount did not mount %s within 30s; see %s", dir, logPath)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// mounted reports whether dir is a mount point of a kelp file system.
func mounted(dir string) bool {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 3 && fields[1] == dir && strings.HasPrefix(fields[2], "fuse") {
			return true
		}
	}
	return false
}

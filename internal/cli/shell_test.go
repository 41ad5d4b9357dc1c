package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/shell"
	"github.com/kelpfs/kelp/internal/testcluster"
)

// runShell runs `kelp shell args...` with stdin and returns its output and error.
func runShell(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetArgs(append([]string{"shell"}, args...))
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.Execute()
	return out.String(), err
}

func TestShellScripted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{DataCenter: "dc1", Rack: "r1"}}})
	master := "--master=" + strings.Join(c.MasterAddrs(), ",")

	out, err := runShell(t, "", master, "-c", "help; volume.list")
	if err != nil || !strings.Contains(out, "volume.fix.replication") || !strings.Contains(out, "DataCenter dc1") {
		t.Fatalf("-c: %v\n%s", err, out)
	}
	out, err = runShell(t, "lock\ncluster.configure -replication 001\nunlock\n", master)
	if err != nil || !strings.Contains(out, "default replication: 001") || !strings.Contains(out, "admin lock released") {
		t.Fatalf("stdin: %v\n%s", err, out)
	}
	// A failing command fails the script (non-zero exit) and stops it.
	out, err = runShell(t, "volume.mark -volumeId 1 -readonly\nvolume.list\n", master)
	if err == nil || !strings.Contains(err.Error(), shell.ErrScriptFailed.Error()) || strings.Contains(out, "DataCenter") {
		t.Fatalf("failing script: %v\n%s", err, out)
	}
	if !strings.Contains(out, "run `lock` first") {
		t.Fatalf("no clear message:\n%s", out)
	}
}

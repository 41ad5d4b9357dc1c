package cli

import (
	"bytes"
	"strings"
	"testing"
)

// Bad flags of filer.sync, filer.backup and filer.restore are clear errors,
// before anything is dialled.
func TestFilerSyncBackupFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"filer.sync", "--a=127.0.0.1:1"}, "--a and --b are required"},
		{[]string{"filer.sync", "--a=nohostport", "--b=127.0.0.1:1"}, "--a:"},
		{[]string{"filer.backup", "--filer=127.0.0.1:1"}, "--dest is required"},
		{[]string{"filer.restore", "--filer=127.0.0.1:1"}, "--src is required"},
		{[]string{"filer.backup", "--filer=bad", "--dest=/tmp/x"}, "--filer:"},
		{[]string{"filer.backup", "--filer=127.0.0.1:1", "--dest=s3:///x"}, "names no bucket"},
	} {
		root := newRootCommand()
		var out bytes.Buffer
		root.SetArgs(c.args)
		root.SetOut(&out)
		root.SetErr(&out)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error containing %q", c.args, err, c.want)
		}
	}
}

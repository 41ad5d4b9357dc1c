package cli

import (
	"slices"
	"testing"
)

func TestMountHelperOptions(t *testing.T) {
	got, err := mountFlagsOf("10.0.0.5:8888/data/x", "/mnt/k", "rw,_netdev,allow_other,ro,collection=c1,replication=001,x-systemd.automount,security.config=/etc/kelp/security.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"mount", "--filer=10.0.0.5:8888", "--filer.path=/data/x", "--dir=/mnt/k",
		"--allow-other", "--read-only", "--collection=c1", "--replication=001", "--security.config=/etc/kelp/security.toml"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if _, err := mountFlagsOf("10.0.0.5:8888", "/mnt/k", "bogus"); err == nil {
		t.Fatal("an unknown option was accepted")
	}
	if _, err := mountFlagsOf("nohost", "/mnt/k", ""); err == nil {
		t.Fatal("a source without a port was accepted")
	}
	if got := helperArgs([]string{"/sbin/mount.kelp", "h:1/", "/mnt"}); !slices.Equal(got, []string{"/sbin/mount.kelp", "mount", "h:1/", "/mnt"}) {
		t.Fatalf("mount.kelp args: %q", got)
	}
}

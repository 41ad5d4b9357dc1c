package cli

import (
	"bytes"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestMetricsPortOnEveryServer: every long-running command has
// --metrics.port; kelp server serves on 9324 by default, the others not.
func TestMetricsPortOnEveryServer(t *testing.T) {
	root := newRootCommand()
	want := map[string]string{"server": "9324", "master": "0", "volume": "0", "filer": "0", "s3": "0", "webdav": "0",
		"mount": "0", "filer.sync": "0", "filer.backup": "0"}
	for _, c := range root.Commands() {
		def, ok := want[c.Name()]
		if !ok {
			continue
		}
		delete(want, c.Name())
		f := c.Flags().Lookup("metrics.port")
		if f == nil {
			t.Errorf("kelp %s has no --metrics.port", c.Name())
			continue
		}
		if f.DefValue != def {
			t.Errorf("kelp %s --metrics.port defaults to %s, want %s", c.Name(), f.DefValue, def)
		}
	}
	for name := range want {
		t.Errorf("no command %s", name)
	}
}

func TestMetricsPortRefusesBadValues(t *testing.T) {
	var m metricsFlags
	m.port = 70000
	if _, err := m.start("127.0.0.1", nil); err == nil {
		t.Error("port 70000 accepted")
	}
	m.port, m.ip = 1, "not-an-ip"
	if _, err := m.start("", nil); err == nil {
		t.Error("--metrics.ip not-an-ip accepted")
	}
}

// TestMetricsPortInUse: a port given on the command line that is taken is
// an error; the default port taken (a second kelp server) only a warning.
func TestMetricsPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	var out bytes.Buffer

	var byDefault metricsFlags
	fl := pflag.NewFlagSet("x", pflag.ContinueOnError)
	byDefault.addFlags(fl, taken)
	stop, err := byDefault.start("127.0.0.1", &out)
	if err != nil || stop == nil {
		t.Fatalf("default port taken: %v", err)
	}
	stop()
	if !strings.Contains(out.String(), "warning: metrics not served") {
		t.Errorf("no warning: %q", out.String())
	}

	var given metricsFlags
	fl = pflag.NewFlagSet("x", pflag.ContinueOnError)
	given.addFlags(fl, 0)
	if err := fl.Parse([]string{"--metrics.port=" + strconv.Itoa(taken)}); err != nil {
		t.Fatal(err)
	}
	if _, err := given.start("127.0.0.1", &out); err == nil || !strings.Contains(err.Error(), "--metrics.port") {
		t.Errorf("a taken --metrics.port: %v", err)
	}
}

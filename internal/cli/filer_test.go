package cli

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestFilerFlags(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	parse := func(prefix string, args ...string) (*filerFlags, error) {
		f := &filerFlags{addr: addrFlags{ip: "127.0.0.1"}, masters: "m:9333", dir: "/tmp/x"}
		fl := pflag.NewFlagSet("t", pflag.ContinueOnError)
		f.addFlags(fl, prefix)
		return f, fl.Parse(args)
	}
	f, err := parse("filer.", "--filer.port=9999", "--filer.store=postgres", "--filer.store.dsn=postgres://h/db", "--filer.chunk-size=4")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.config(log)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 9999 || cfg.Store != "postgres" || cfg.StoreDSN != "postgres://h/db" || cfg.ChunkSize != 4<<20 || cfg.Masters[0] != "m:9333" {
		t.Fatalf("config %+v", cfg)
	}
	for _, tc := range []struct{ args, want string }{
		{"--store=redis", "needs --store.dsn"},
		{"--store=mysql", "not embedded, postgres or redis"},
		{"--chunk-size=0", "--chunk-size"},
	} {
		f, err := parse("", tc.args)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.config(log); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.args, err, tc.want)
		}
	}
}

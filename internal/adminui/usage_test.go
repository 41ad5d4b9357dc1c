package adminui

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/kelpfs/kelp/internal/filer"
	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
	"github.com/kelpfs/kelp/internal/testcluster"
)

// TestCountUsageBounded: the walk adds up files in nested folders across
// listing pages, and stops at its limit saying so.
func TestCountUsageBounded(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{{}}})
	fs, err := filerserver.New(filerserver.Config{IP: "127.0.0.1", Masters: c.MasterAddrs(), Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fs.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	f := fs.Filer()
	for i := range 12 { // 12 files of i+1 bytes: 78 bytes, in b/ and b/sub/
		p := fmt.Sprintf("/b/f%02d", i)
		if i%2 == 1 {
			p = fmt.Sprintf("/b/sub/f%02d", i)
		}
		if _, err := f.WriteFile(ctx, p, strings.NewReader(strings.Repeat("x", i+1)), filer.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cc, err := grpc.NewClient(fs.GRPCAddr(), pb.DialOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	fc := filerpb.NewFilerClient(cc)
	old := usagePage
	usagePage = 4 // several pages per folder
	t.Cleanup(func() { usagePage = old })
	bytes, files, partial, err := countUsage(ctx, fc, "/b", 100)
	if err != nil || bytes != 78 || files != 12 || partial {
		t.Errorf("whole walk: %d bytes, %d files, partial %v, %v; want 78, 12, false", bytes, files, partial, err)
	}
	_, files, partial, err = countUsage(ctx, fc, "/b", 5)
	if err != nil || !partial || files > 5 {
		t.Errorf("walk bounded at 5 entries: %d files, partial %v, %v", files, partial, err)
	}
}

package benchmark

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/client/clienttest"
)

// Issue 8: reads that follow writes measure a warm page cache. The report
// says so, and --cold empties the cache between the phases.
func TestRunSaysWhereReadsComeFrom(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Servers: 2})
	var out bytes.Buffer
	if _, err := Run(context.Background(), Config{Masters: []string{cl.Master.URL}, N: 20, Size: 100, Out: &out}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "warm reads: the files were just written and are served from the page cache") {
		t.Fatalf("warm report does not say so:\n%s", out.String())
	}

	out.Reset()
	drops := 0
	before := cl.Servers[0].Reads.Load() + cl.Servers[1].Reads.Load()
	rep, err := Run(context.Background(), Config{
		Masters: []string{cl.Master.URL}, N: 20, Size: 100, Out: &out, Cold: true,
		DropCaches: func() error {
			drops++
			// Between the phases: every file written, none read yet.
			if n := cl.NeedleCount(); n != 40 {
				t.Errorf("caches dropped with %d files stored, want 40", n)
			}
			if r := cl.Servers[0].Reads.Load() + cl.Servers[1].Reads.Load(); r != before {
				t.Errorf("caches dropped after %d reads", r-before)
			}
			return nil
		},
	})
	if err != nil || rep.Failed() != 0 || rep.Read.Requests != 20 {
		t.Fatalf("cold run: %+v, %v", rep, err)
	}
	if drops != 1 {
		t.Fatalf("caches dropped %d times", drops)
	}
	if !strings.Contains(out.String(), "cold reads: the page cache was dropped") {
		t.Fatalf("cold report does not say so:\n%s", out.String())
	}

	// A failing drop stops the run before the reads, with its error.
	boom := errors.New("no permission")
	_, err = Run(context.Background(), Config{Masters: []string{cl.Master.URL}, N: 5, Size: 1, Cold: true,
		DropCaches: func() error { return boom }})
	if !errors.Is(err, boom) {
		t.Fatalf("Run with a failing drop = %v", err)
	}
}

// Without root, --cold is refused before anything is written.
func TestColdNeedsRoot(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("running as root: the page cache can be dropped")
	}
	cl := clienttest.NewCluster(t, clienttest.Options{})
	_, err := Run(context.Background(), Config{Masters: []string{cl.Master.URL}, N: 5, Size: 1, Cold: true})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "root") {
		t.Fatalf("Run --cold as a user = %v, want ErrConfig naming root", err)
	}
	if cl.Master.Assigns.Load() != 0 {
		t.Fatal("files written before --cold was refused")
	}
}

func TestReportErr(t *testing.T) {
	rep := &Report{Write: Phase{Requests: 10}, Read: Phase{Requests: 10}}
	if err := rep.Err(); err != nil {
		t.Fatalf("no failure: %v", err)
	}
	rep.Read = Phase{Requests: 10, Failed: 2, FirstError: "checksum"}
	rep.Write = Phase{Requests: 10, Failed: 1, FirstError: "volume full"}
	err := rep.Err()
	if !errors.Is(err, ErrRequestsFailed) || !strings.Contains(err.Error(), "requests failed: 3 of 20 requests") ||
		!strings.Contains(err.Error(), "write: volume full") {
		t.Fatalf("Err = %v", err)
	}
}

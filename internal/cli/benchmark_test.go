package cli

import (
	"bytes"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kelpfs/kelp/internal/client/clienttest"
)

func runBenchmark(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetArgs(append([]string{"benchmark"}, args...))
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.Execute()
	return out.String(), err
}

// Issue 8: `kelp benchmark` exited 0 although its report counted failures.
func TestBenchmarkExitsNonZeroOnFailures(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	out, err := runBenchmark(t, "--master="+cl.Master.URL, "--n=20", "--size=10")
	if err != nil {
		t.Fatalf("clean run: %v\n%s", err, out)
	}
	var writes atomic.Int32
	cl.Servers[0].SetHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPut && writes.Add(1)%5 == 0 {
			clienttest.WriteError(w, http.StatusInsufficientStorage, "volume full")
			return true
		}
		return false
	})
	out, err = runBenchmark(t, "--master="+cl.Master.URL, "--n=20", "--size=10")
	if err == nil || !strings.Contains(err.Error(), "requests failed: 4 of 36 requests") || !strings.Contains(err.Error(), "volume full") {
		t.Fatalf("run with 4 failed writes: err %v\n%s", err, out)
	}
	if !strings.Contains(out, "4 failed") {
		t.Fatalf("report does not show the failures:\n%s", out)
	}
}

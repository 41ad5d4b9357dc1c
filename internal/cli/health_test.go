package cli

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealth(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		w.Write([]byte("no leader"))
	}))
	defer srv.Close()
	check := func(url string) error {
		cmd := newHealthCommand()
		cmd.SetArgs([]string{url})
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		return cmd.Execute()
	}
	if err := check(srv.URL + "/healthz"); err != nil {
		t.Fatalf("healthy server: %v", err)
	}
	if err := check(strings.TrimPrefix(srv.URL, "http://") + "/healthz"); err != nil {
		t.Fatalf("host:port without scheme: %v", err)
	}
	status = http.StatusServiceUnavailable
	if err := check(srv.URL + "/healthz"); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("unhealthy server: err %v, want the 503", err)
	}
}

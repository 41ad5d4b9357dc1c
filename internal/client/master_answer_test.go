package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestMasterThatNeverAnswersIsSkipped: a master whose connection is alive
// but silent (a kept-alive connection whose other end lost its address, a
// cut network) must cost one answer timeout, not the caller's whole
// deadline; the next master answers.
func TestMasterThatNeverAnswersIsSkipped(t *testing.T) {
	release := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer silent.Close()
	defer close(release)
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"fid":"3,01637037d6","url":"127.0.0.1:8080","publicUrl":"127.0.0.1:8080","count":1}`))
	}))
	defer good.Close()
	c, err := New(Config{Masters: []string{silent.URL, good.URL}, AnswerTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	a, err := c.Assign(ctx, AssignRequest{})
	if err != nil {
		t.Fatalf("assign with a silent first master: %v (after %v)", err, time.Since(start))
	}
	if a.URL != "127.0.0.1:8080" || a.FID.Volume != 3 {
		t.Fatalf("assign answered %+v", a)
	}
}

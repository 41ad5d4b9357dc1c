package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/client/clienttest"
)

// failFirstWrites answers the first n writes on s with status.
func failFirstWrites(s *clienttest.VolumeServer, n int32, status int) *atomic.Int32 {
	var seen atomic.Int32
	s.SetHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodPut && r.Method != http.MethodPost {
			return false
		}
		if seen.Add(1) > n {
			return false
		}
		io.Copy(io.Discard, r.Body)
		clienttest.WriteError(w, status, "injected "+http.StatusText(status))
		return true
	})
	return &seen
}

func TestPutRetriesWithNewAssignment(t *testing.T) {
	for _, status := range []int{http.StatusInsufficientStorage, http.StatusInternalServerError, http.StatusNotFound} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			cl := clienttest.NewCluster(t, clienttest.Options{Servers: 1, Volumes: 2})
			c := newClient(t, client.Config{Masters: []string{cl.Master.URL}})
			seen := failFirstWrites(cl.Servers[0], 1, status)
			data := []byte("retry me")
			id, res, err := c.PutBytes(context.Background(), client.AssignRequest{}, data, client.UploadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if seen.Load() != 2 || cl.Master.Assigns.Load() != 2 {
				t.Fatalf("%d writes, %d assigns; want 2 and 2", seen.Load(), cl.Master.Assigns.Load())
			}
			if got, ok := cl.Needle(id); !ok || !bytes.Equal(got, data) || res.Size != int64(len(data)) {
				t.Fatalf("stored %q, %v; result %+v", got, ok, res)
			}
			if cl.NeedleCount() != 1 {
				t.Fatalf("%d needles stored, want 1", cl.NeedleCount())
			}
		})
	}
}

func TestPutDoesNotRetryClientErrors(t *testing.T) {
	for _, status := range []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge} {
		cl := clienttest.NewCluster(t, clienttest.Options{})
		c := newClient(t, client.Config{Masters: []string{cl.Master.URL}})
		failFirstWrites(cl.Servers[0], 100, status)
		_, _, err := c.PutBytes(context.Background(), client.AssignRequest{}, []byte("x"), client.UploadOptions{})
		var he *client.HTTPError
		if !errors.As(err, &he) || he.Status != status {
			t.Fatalf("status %d: Put = %v", status, err)
		}
		if n := cl.Master.Assigns.Load(); n != 1 {
			t.Fatalf("status %d: %d assigns, want 1", status, n)
		}
	}
}

func TestPutTooLargeFromServer(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{MaxSize: 100})
	c := newClient(t, client.Config{Masters: []string{cl.Master.URL}})
	_, _, err := c.PutBytes(context.Background(), client.AssignRequest{}, make([]byte, 101), client.UploadOptions{})
	var he *client.HTTPError
	if !errors.As(err, &he) || he.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("Put of 101 bytes with a 100-byte limit = %v", err)
	}
}

func TestPutGivesUpAfterMaxRetries(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	c := newClient(t, client.Config{Masters: []string{cl.Master.URL}, MaxRetries: 2})
	seen := failFirstWrites(cl.Servers[0], 1000, http.StatusInsufficientStorage)
	_, _, err := c.PutBytes(context.Background(), client.AssignRequest{}, []byte("x"), client.UploadOptions{})
	var he *client.HTTPError
	if !errors.As(err, &he) || he.Status != http.StatusInsufficientStorage {
		t.Fatalf("Put = %v, want the last 507", err)
	}
	if seen.Load() != 3 || cl.Master.Assigns.Load() != 3 {
		t.Fatalf("%d writes, %d assigns; want 3 and 3", seen.Load(), cl.Master.Assigns.Load())
	}
}

func TestPutWaitsForWritableVolume(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	c := newClient(t, client.Config{Masters: []string{cl.Master.URL}})
	var calls atomic.Int32
	cl.Master.SetHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/dir/assign" && calls.Add(1) <= 2 {
			clienttest.WriteError(w, http.StatusServiceUnavailable, "no writable volume")
			return true
		}
		return false
	})
	if _, _, err := c.PutBytes(context.Background(), client.AssignRequest{}, []byte("x"), client.UploadOptions{}); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 3 {
		t.Fatalf("%d assign calls, want 3", calls.Load())
	}
}

func TestPutRespectsContext(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	c := newClient(t, client.Config{Masters: []string{cl.Master.URL}, MaxRetries: 1000})
	failFirstWrites(cl.Servers[0], 1<<30, http.StatusInternalServerError)
	ctx, cancel := context.WithCancel(context.Background())
	cl.Master.SetHook(func(w http.ResponseWriter, r *http.Request) bool {
		if cl.Master.Assigns.Load() >= 3 {
			cancel()
		}
		return false
	})
	_, _, err := c.PutBytes(ctx, client.AssignRequest{}, []byte("x"), client.UploadOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Put = %v, want context.Canceled", err)
	}
	if n := cl.Master.Assigns.Load(); n > 5 {
		t.Fatalf("%d assigns after cancel", n)
	}
}

func TestGetFailsOverToSecondLocation(t *testing.T) {
	for _, mode := range []string{"500", "closed"} {
		t.Run(mode, func(t *testing.T) {
			cl := clienttest.NewCluster(t, clienttest.Options{Servers: 2, Volumes: 1, Replicas: 2})
			c := newClient(t, client.Config{Masters: []string{cl.Master.URL}})
			ctx := context.Background()
			id, _, err := c.PutBytes(ctx, client.AssignRequest{}, []byte("replicated"), client.UploadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			first := cl.Servers[0]
			var hits atomic.Int32
			switch mode {
			case "500":
				first.SetHook(func(w http.ResponseWriter, r *http.Request) bool {
					hits.Add(1)
					clienttest.WriteError(w, http.StatusInternalServerError, "disk on fire")
					return true
				})
			case "closed":
				first.Close()
			}
			rc, _, err := c.Get(ctx, id, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, rc); string(got) != "replicated" {
				t.Fatalf("read %q", got)
			}
			if cl.Servers[1].Reads.Load() != 1 {
				t.Fatalf("second location served %d reads", cl.Servers[1].Reads.Load())
			}
			if mode == "500" && hits.Load() != 1 {
				t.Fatalf("first location asked %d times", hits.Load())
			}
			// Delete fails over the same way.
			if err := c.Delete(ctx, id); err != nil {
				t.Fatal(err)
			}
			if _, ok := cl.Needle(id); ok {
				t.Fatal("needle survived Delete")
			}
		})
	}
}

func TestGetAllLocationsFailing(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Servers: 2, Volumes: 1, Replicas: 2})
	c := newClient(t, client.Config{Masters: []string{cl.Master.URL}})
	ctx := context.Background()
	id, _, err := c.PutBytes(ctx, client.AssignRequest{}, []byte("x"), client.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cl.Servers[0].SetHook(func(w http.ResponseWriter, r *http.Request) bool {
		clienttest.WriteError(w, http.StatusNotFound, "needle not found")
		return true
	})
	cl.Servers[1].SetHook(func(w http.ResponseWriter, r *http.Request) bool {
		clienttest.WriteError(w, http.StatusServiceUnavailable, "overloaded")
		return true
	})
	_, _, err = c.Get(ctx, id, nil)
	var he *client.HTTPError
	// A replica that failed might hold the needle: the answer is not "not found".
	if !errors.As(err, &he) || he.Status != http.StatusServiceUnavailable || errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Get = %v, want the 503", err)
	}
	cl.Servers[1].SetHook(func(w http.ResponseWriter, r *http.Request) bool {
		clienttest.WriteError(w, http.StatusNotFound, "needle not found")
		return true
	})
	if _, _, err = c.Get(ctx, id, nil); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Get with 404 everywhere = %v", err)
	}
}

// Put re-reads an io.ReaderAt from offset 0 on each attempt.
func TestPutReaderAtRetried(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	c := newClient(t, client.Config{Masters: []string{cl.Master.URL}})
	failFirstWrites(cl.Servers[0], 2, http.StatusServiceUnavailable)
	const data = "read me three times"
	id, _, err := c.Put(context.Background(), client.AssignRequest{}, strings.NewReader(data), int64(len(data)), client.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := cl.Needle(id); !ok || string(got) != data {
		t.Fatalf("stored %q, %v", got, ok)
	}
	if _, _, err := c.Put(context.Background(), client.AssignRequest{}, strings.NewReader(data), -1, client.UploadOptions{}); err == nil {
		t.Fatal("Put with a negative size succeeded")
	}
}

package client_test

import (
	"context"
	"testing"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/client/clienttest"
	"github.com/kelpfs/kelp/internal/localread"
)

// TestLocalReadsPreferTheCopyOnThisHost: of a needle's two copies, the one
// whose server answers local reads on this host is read first, though the
// other comes first in the lookup's order; without LocalReads the socket is
// never asked.
func TestLocalReadsPreferTheCopyOnThisHost(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Servers: 2, Replicas: 2})
	ctx := context.Background()
	c := newClient(t, client.Config{Masters: []string{cl.Master.URL}, LocalReads: true})
	defer c.Close()
	id, _, err := c.PutBytes(ctx, client.AssignRequest{}, []byte("from HTTP"), client.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	locs, err := c.Lookup(ctx, id.Volume)
	if err != nil || len(locs) != 2 {
		t.Fatalf("lookup: %v, %v", locs, err)
	}
	// The second copy's server "runs here": its socket answers with other
	// bytes, so that the test sees which path the read took.
	srv, err := localread.Listen(localread.SocketPath(locs[1].URL), func(string, int64, int64) (localread.Answer, bool) {
		return localread.Answer{Header: localread.Header{Size: 11}, Data: []byte("from socket")}, true
	}, nil)
	if err != nil {
		t.Skip(err)
	}
	go srv.Serve()
	defer srv.Close()
	rc, _, err := c.Get(ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, rc); string(got) != "from socket" {
		t.Fatalf("read %q: the copy on this host was not preferred", got)
	}
	plain := newClient(t, client.Config{Masters: []string{cl.Master.URL}})
	rc, _, err = plain.Get(ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, rc); string(got) != "from HTTP" {
		t.Fatalf("a client without LocalReads read %q", got)
	}
}

package filerserver

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/testcluster"
)

// Issue 8: the filer ignored ?replication=100 without a word. A bad code,
// collection or any ttl is refused with a 400 that says why, on every kind
// of write, before anything is stored.
func TestHTTPLayoutParametersValidated(t *testing.T) {
	_, base := startFake(t, 0)
	for _, tc := range []struct{ method, query, msg string }{
		{"PUT", "replication=1x0", "replication"},
		{"PUT", "replication=1000", "replication"},
		{"PUT", "collection=a/b", "collection"},
		{"PUT", "collection=..", "collection"},
		{"PUT", "collection=" + strings.Repeat("c", 200), "collection"},
		{"PUT", "ttl=3d", "ttl"},
		{"POST", "op=append&replication=abc", "replication"},
		{"PUT", "offset=0&collection=%20", "collection"},
		{"POST", "op=mkdir&replication=100", "replication"},
		{"POST", "op=rename&from=/x&collection=pics", "collection"},
	} {
		resp, body := do(t, tc.method, base+"/v/f?"+tc.query, strings.NewReader("data"))
		want(t, resp, body, 400)
		if !strings.Contains(string(body), tc.msg) {
			t.Errorf("%s ?%s: body %s does not name %s", tc.method, tc.query, body, tc.msg)
		}
	}
	resp, body := do(t, "GET", base+"/v/f", nil)
	want(t, resp, body, 404)
	// Valid values are accepted (the fake blob layer has no layouts).
	resp, body = do(t, "PUT", base+"/v/f?replication=001&collection=pics-2.x_y", strings.NewReader("data"))
	want(t, resp, body, 201)
}

// ?replication= and ?collection= choose where a write's chunks go.
func TestClusterLayoutParametersHonoured(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Volumes: []testcluster.VolumeSpec{
		{DataCenter: "dc1"}, {DataCenter: "dc2"},
	}})
	s := startOn(t, c, Config{ChunkSize: 1 << 10})
	base := "http://" + s.Addr()
	layoutOf := func(p string) (collection, replication string) {
		t.Helper()
		e, err := s.Filer().FindEntry(context.Background(), p)
		if err != nil || len(e.Chunks) == 0 {
			t.Fatalf("%s: %v, %d chunks", p, err, len(e.Chunks))
		}
		var status struct {
			Topology struct {
				Layouts []struct {
					Collection, Replication string
					Volumes                 []uint32
				}
			}
		}
		resp, err := http.Get("http://" + c.Leader().Addr + "/dir/status")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&status); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, ch := range e.Chunks {
			id, err := fid.Parse(ch.FID)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range status.Topology.Layouts {
				for _, v := range l.Volumes {
					if v == id.Volume {
						collection, replication = l.Collection, l.Replication
						seen[l.Collection+"/"+l.Replication] = true
					}
				}
			}
		}
		if len(seen) != 1 {
			t.Fatalf("%s: chunks in layouts %v, want one", p, seen)
		}
		return collection, replication
	}
	data := strings.Repeat("x", 3000) // three chunks
	resp, body := do(t, "PUT", base+"/plain", strings.NewReader(data))
	want(t, resp, body, 201)
	if col, repl := layoutOf("/plain"); col != "" || repl != "000" {
		t.Fatalf("default write went to %q/%s", col, repl)
	}
	resp, body = do(t, "PUT", base+"/two-dcs?replication=100&collection=pics", strings.NewReader(data))
	want(t, resp, body, 201)
	if col, repl := layoutOf("/two-dcs"); col != "pics" || repl != "100" {
		t.Fatalf("?replication=100&collection=pics went to %q/%s", col, repl)
	}
	// Appended chunks follow the request too.
	resp, body = do(t, "POST", base+"/appended?op=append&replication=100", strings.NewReader(data))
	want(t, resp, body, 201)
	if _, repl := layoutOf("/appended"); repl != "100" {
		t.Fatalf("append with ?replication=100 went to %s", repl)
	}
}

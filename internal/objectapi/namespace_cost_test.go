package objectapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/filer"
)

// Plain keys must cost what they did before colliding keys were allowed:
// one lookup per GET, one filer call per unversioned PUT.
func BenchmarkPutGet4KiB(b *testing.B) {
	for _, state := range []string{"", VersioningEnabled} {
		b.Run("versioning="+state, func(b *testing.B) {
			l, _ := newTestLayer(b)
			ctx := context.Background()
			if err := l.CreateBucket(ctx, "bkt", ""); err != nil {
				b.Fatal(err)
			}
			if state != "" {
				if err := l.PutBucketVersioning(ctx, "bkt", state); err != nil {
					b.Fatal(err)
				}
			}
			data := bytes.Repeat([]byte("x"), 4096)
			b.SetBytes(2 * int64(len(data)))
			b.ResetTimer()
			for i := range b.N {
				key := fmt.Sprintf("dir%d/obj%d", i%16, i%256)
				if _, err := l.PutObject(ctx, "bkt", key, bytes.NewReader(data), PutOptions{Size: int64(len(data))}); err != nil {
					b.Fatal(err)
				}
				o, err := l.GetObject(ctx, "bkt", key, GetOptions{})
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, o.Body)
				o.Body.Close()
			}
		})
	}
}

// countingNS counts the namespace calls made through it.
type countingNS struct {
	Namespace
	calls map[string]int
}

func (c *countingNS) FindEntry(ctx context.Context, p string) (*filer.Entry, error) {
	c.calls["find"]++
	return c.Namespace.FindEntry(ctx, p)
}

func (c *countingNS) ListEntries(ctx context.Context, dir string, o filer.ListOptions) ([]*filer.Entry, bool, error) {
	c.calls["list"]++
	es, more, err := c.Namespace.ListEntries(ctx, dir, o)
	c.calls["entries"] += len(es)
	return es, more, err
}

func (c *countingNS) CreateEntry(ctx context.Context, e *filer.Entry, o filer.CreateOptions) error {
	c.calls["create"]++
	return c.Namespace.CreateEntry(ctx, e, o)
}

func (c *countingNS) DeleteEntry(ctx context.Context, p string, recursive bool) error {
	c.calls["delete"]++
	return c.Namespace.DeleteEntry(ctx, p, recursive)
}

func (c *countingNS) Atomically(ctx context.Context, fn func(filer.Batch) error) error {
	c.calls["tx"]++
	return c.Namespace.Atomically(ctx, fn)
}

// TestPlainKeysCost pins what ordinary keys cost in namespace calls, so
// that colliding keys never make them dearer: a GET is one lookup, an
// unversioned PUT the bucket lookup and one create.
func TestPlainKeysCost(t *testing.T) {
	l, _ := newTestLayer(t)
	ctx := context.Background()
	if err := l.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	c := &countingNS{Namespace: l.ns, calls: map[string]int{}}
	l.ns = c
	for _, key := range []string{"top", "a/b/c"} {
		clear(c.calls)
		if _, err := l.PutObject(ctx, "bkt", key, strings.NewReader("x"), PutOptions{Size: 1}); err != nil {
			t.Fatal(err)
		}
		if want := map[string]int{"find": 1, "create": 1}; !maps.Equal(c.calls, want) {
			t.Errorf("PUT %q: calls %v, want %v", key, c.calls, want)
		}
		clear(c.calls)
		if _, err := l.GetObject(ctx, "bkt", key, GetOptions{NoBody: true}); err != nil {
			t.Fatal(err)
		}
		if want := map[string]int{"find": 1}; !maps.Equal(c.calls, want) {
			t.Errorf("GET %q: calls %v, want %v", key, c.calls, want)
		}
	}
	// A shadowed key costs one lookup more to read.
	putString(t, l, "bkt", "a/b", "shadowed")
	clear(c.calls)
	mustRead(t, l, "bkt", "a/b", "shadowed")
	if want := map[string]int{"find": 2}; !maps.Equal(c.calls, want) {
		t.Errorf("GET of a shadowed key: calls %v, want %v", c.calls, want)
	}
}

// TestListPageCostInLargeDirectory pins that a page starting deep in a
// large directory reads about the entries it lists. Names with a byte
// below '/' after a common stem ("key-01500") used to make every page
// read the directory from the stem "key" on.
func TestListPageCostInLargeDirectory(t *testing.T) {
	l, _ := newTestLayer(t)
	ctx := context.Background()
	if err := l.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	const n = 2000
	for i := range n {
		if _, err := l.PutObject(ctx, "bkt", fmt.Sprintf("d/key-%05d", i), strings.NewReader(""), PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := &countingNS{Namespace: l.ns, calls: map[string]int{}}
	l.ns = c
	for _, o := range []ListOptions{
		{After: "d/key-01500", MaxKeys: 10},
		{After: "d/key-01500", MaxKeys: 10, Prefix: "d/key-0"},
	} {
		clear(c.calls)
		res, err := l.ListObjects(ctx, "bkt", o)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Objects) != 10 || res.Objects[0].Key != "d/key-01501" {
			t.Fatalf("%+v: listed %q", o, keysOf(res))
		}
		if c.calls["entries"] > 2*minFetch {
			t.Errorf("%+v: read %d entries for a page of 10 (calls %v)", o, c.calls["entries"], c.calls)
		}
	}
}

// TestListVersionsPageCost pins that a page of ListObjectVersions that
// resumes after a noncurrent version reads from there, not every version
// of the key before it.
func TestListVersionsPageCost(t *testing.T) {
	l, _ := newTestLayer(t)
	ctx := context.Background()
	if err := l.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	if err := l.PutBucketVersioning(ctx, "bkt", VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := range n {
		putString(t, l, "bkt", "k", fmt.Sprint(i))
	}
	all, err := l.ListObjectVersions(ctx, "bkt", ListVersionsOptions{MaxKeys: n})
	if err != nil || len(all.Versions) != n {
		t.Fatalf("%d versions, %v", len(all.Versions), err)
	}
	c := &countingNS{Namespace: l.ns, calls: map[string]int{}}
	l.ns = c
	marker := all.Versions[250].VersionID
	page, err := l.ListObjectVersions(ctx, "bkt", ListVersionsOptions{KeyMarker: "k", VersionIDMarker: marker, MaxKeys: 10})
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, v := range page.Versions {
		got = append(got, v.VersionID)
	}
	for _, v := range all.Versions[251:261] {
		want = append(want, v.VersionID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after version 250: got %q, want %q", got, want)
	}
	// The 49 versions after the marker (read a namespace page at a time)
	// and the walk's few entries; not the 250 before it.
	if c.calls["entries"] > 100 {
		t.Errorf("read %d entries for a page of 10 (calls %v)", c.calls["entries"], c.calls)
	}
}

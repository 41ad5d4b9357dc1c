package objectapi

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/chunk/chunktest"
	"github.com/kelpfs/kelp/internal/filer"
	"github.com/kelpfs/kelp/internal/filer/store/pebble"
)

func newTestLayer(t testing.TB) (*Layer, *chunktest.Mem) {
	t.Helper()
	st, err := pebble.Open(t.TempDir(), &pebble.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	blobs := chunktest.New()
	f, err := filer.New(filer.Config{Store: st, Blobs: blobs, ChunkSize: 1024, GCDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close(); st.Close() })
	l, err := New(Config{Namespace: f, MinPartSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	return l, blobs
}

// model lists keys the way S3 does, from a sorted slice.
func model(keys []string, o ListOptions) ListResult {
	var res ListResult
	n, last := 0, ""
	for _, k := range keys {
		if !strings.HasPrefix(k, o.Prefix) {
			continue
		}
		item, isPrefix := k, false
		if o.Delimiter != "" {
			if i := strings.Index(k[len(o.Prefix):], o.Delimiter); i >= 0 {
				item, isPrefix = k[:len(o.Prefix)+i+len(o.Delimiter)], true
			}
		}
		if item <= o.After || isPrefix && item == last {
			continue
		}
		if n == o.MaxKeys {
			res.IsTruncated = true
			break
		}
		n++
		res.Next = item
		if isPrefix {
			last = item
			res.CommonPrefixes = append(res.CommonPrefixes, item)
		} else {
			res.Objects = append(res.Objects, ObjectInfo{Key: item})
		}
	}
	return res
}

func keysOf(r ListResult) []string {
	var out []string
	for _, o := range r.Objects {
		out = append(out, o.Key)
	}
	return out
}

// TestListMatchesModel lists a tree of awkward keys ("a" < "a.txt" <
// "a/" in S3 order, though the namespace lists "a" first) with every
// page size, prefix and delimiter, paging with the returned markers, and
// compares with a brute-force model.
func TestListMatchesModel(t *testing.T) {
	l, _ := newTestLayer(t)
	ctx := context.Background()
	if err := l.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	keys := []string{"a.txt", "a-b/c", "a/b", "a/b.c", "a/b/c", "a/b/c/d", "a/b-c", "a+b", "a b",
		"ab/", "ab/x", "b/", "b/c/", "b/c/d", "c%20d", "dir/", "dir/sub/", "é/ü", "z", "zz/y/x/w", "a!", "a/!", "a",
		// A marker "a-b-c.d" has three shorter names whose directories sort after it ("a/", "a-b/", "a-b-c/").
		"a-b-c.d", "a-b-c/e", "a-b.x", "a-b-c.d/f"}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, k := range keys {
		// "a", "a/b" and "a/b/c" are objects and prefixes at once.
		if _, err := l.PutObject(ctx, "bkt", k, strings.NewReader("x"), PutOptions{Size: 1}); err != nil {
			t.Fatalf("put %q: %v", k, err)
		}
	}
	var stored []string
	all, err := l.ListObjects(ctx, "bkt", ListOptions{MaxKeys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	stored = keysOf(all)
	sorted := slices.Clone(stored)
	sort.Strings(sorted)
	if !slices.Equal(stored, sorted) {
		t.Fatalf("full listing not in key order:\n%q", stored)
	}
	if len(stored) != len(keys) {
		t.Fatalf("only %d of %d keys stored: %q", len(stored), len(keys), stored)
	}
	prefixes := []string{"", "a", "a/", "a/b", "a/b/", "ab", "b/", "b/c/", "z", "nope", "é"}
	for _, prefix := range prefixes {
		for _, delim := range []string{"", "/", "bkt", "-"} {
			for _, max := range []int{1, 2, 3, 1000} {
				o := ListOptions{Prefix: prefix, Delimiter: delim, MaxKeys: max}
				if rng.IntN(3) == 0 {
					o.After = stored[rng.IntN(len(stored))]
				}
				for page := 0; ; page++ {
					got, err := l.ListObjects(ctx, "bkt", o)
					if err != nil {
						t.Fatal(err)
					}
					want := model(stored, o)
					if !slices.Equal(keysOf(got), keysOf(want)) || !slices.Equal(got.CommonPrefixes, want.CommonPrefixes) ||
						got.IsTruncated != want.IsTruncated || got.IsTruncated && got.Next != want.Next {
						t.Fatalf("%+v page %d:\n got  %q %q %v %q\n want %q %q %v %q", o, page,
							keysOf(got), got.CommonPrefixes, got.IsTruncated, got.Next,
							keysOf(want), want.CommonPrefixes, want.IsTruncated, want.Next)
					}
					if !got.IsTruncated {
						break
					}
					o.After = got.Next
				}
			}
		}
	}
}

func TestDeletePrunesEmptyDirectories(t *testing.T) {
	l, _ := newTestLayer(t)
	ctx := context.Background()
	l.CreateBucket(ctx, "bkt", "")
	for _, k := range []string{"x/y/z", "x/keep/", "x/y2"} {
		if _, err := l.PutObject(ctx, "bkt", k, strings.NewReader(""), PutOptions{Size: 0}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.DeleteObject(ctx, "bkt", "x/y/z"); err != nil {
		t.Fatal(err)
	}
	res, _ := l.ListObjects(ctx, "bkt", ListOptions{Delimiter: "/", Prefix: "x/", MaxKeys: 100})
	if !slices.Equal(res.CommonPrefixes, []string{"x/keep/"}) || !slices.Equal(keysOf(res), []string{"x/y2"}) {
		t.Fatalf("after delete: %q %q", keysOf(res), res.CommonPrefixes)
	}
	if err := l.DeleteBucket(ctx, "bkt"); !errors.Is(err, ErrBucketNotEmpty) {
		t.Fatalf("delete non-empty bucket: %v", err)
	}
	for _, k := range []string{"x/keep/", "x/y2"} {
		if err := l.DeleteObject(ctx, "bkt", k); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.DeleteBucket(ctx, "bkt"); err != nil {
		t.Fatalf("delete emptied bucket: %v", err)
	}
}

func TestKeyRules(t *testing.T) {
	for key, want := range map[string]error{
		"a": nil, "a/b/": nil, "a b+c%d/é": nil, strings.Repeat("k/", 500): nil,
		"": ErrInvalidKey, "a//b": ErrUnsupportedKey, "/a": ErrUnsupportedKey, "a/./b": ErrUnsupportedKey,
		"a/../b": ErrUnsupportedKey, strings.Repeat("x", 1025): ErrKeyTooLong,
		"bad\xff": ErrUnsupportedKey,
	} {
		if err := checkKey(key); !errors.Is(err, want) && !(want == nil && err == nil) {
			t.Errorf("checkKey(%.20q) = %v, want %v", key, err, want)
		}
	}
	for name, ok := range map[string]bool{"abc": true, "my-bucket.1": true, "ab": false, "Abc": false, "a..b": false,
		"192.168.1.1": false, "-ab": false, "xn--ab": false, strings.Repeat("a", 64): false, "a_b": false} {
		if err := ValidBucketName(name); (err == nil) != ok {
			t.Errorf("ValidBucketName(%q) = %v", name, err)
		}
	}
}

func TestParseRangeAndConditions(t *testing.T) {
	cases := []struct {
		h           string
		size        int64
		start, n    int64
		invalid, no bool
	}{
		{"bytes=0-9", 100, 0, 10, false, false},
		{"bytes=90-", 100, 90, 10, false, false},
		{"bytes=-10", 100, 90, 10, false, false},
		{"bytes=-200", 100, 0, 100, false, false},
		{"bytes=50-500", 100, 50, 50, false, false},
		{"bytes=100-", 100, 0, 0, true, false},
		{"bytes=0-", 0, 0, 0, true, false},
		{"bytes=5-1", 100, 0, 0, false, true},
		{"items=0-1", 100, 0, 0, false, true},
		{"bytes=0-1,3-4", 100, 0, 0, false, true},
		{"bytes=x-", 100, 0, 0, false, true},
	}
	for _, c := range cases {
		r := ParseRange(c.h)
		if c.no {
			if r != nil {
				t.Errorf("%q parsed as %+v, want ignored", c.h, r)
			}
			continue
		}
		start, n, err := r.resolve(c.size)
		if c.invalid != errors.Is(err, ErrInvalidRange) || !c.invalid && (start != c.start || n != c.n) {
			t.Errorf("%q of %d: %d+%d %v", c.h, c.size, start, n, err)
		}
	}
}

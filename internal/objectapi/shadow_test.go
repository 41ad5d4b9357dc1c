package objectapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/filer"
)

// Keys that are objects and prefixes of other keys at once ("a", "a/",
// "a/b") are all stored, in every versioning state and every order of
// writing, read back, listed in S3's order and deleted in every order.

var bucketStates = []string{"", VersioningEnabled, VersioningSuspended}

func newStateBucket(t *testing.T, l *Layer, bucket, state string) {
	t.Helper()
	ctx := context.Background()
	if err := l.CreateBucket(ctx, bucket, ""); err != nil {
		t.Fatal(err)
	}
	if state != "" {
		if err := l.PutBucketVersioning(ctx, bucket, state); err != nil {
			t.Fatal(err)
		}
	}
}

func putString(t testing.TB, l *Layer, bucket, key, body string) ObjectInfo {
	t.Helper()
	oi, err := l.PutObject(context.Background(), bucket, key, strings.NewReader(body), PutOptions{Size: int64(len(body))})
	if err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
	if oi.Key != key {
		t.Fatalf("put %q answered key %q", key, oi.Key)
	}
	return oi
}

// readString returns the content of key, or an error.
func readString(l *Layer, bucket, key, vid string) (string, error) {
	o, err := l.GetObject(context.Background(), bucket, key, GetOptions{VersionID: vid})
	if err != nil {
		return "", err
	}
	defer o.Body.Close()
	b, err := io.ReadAll(o.Body)
	if o.Info.Key != key {
		return "", fmt.Errorf("GET %q answered key %q", key, o.Info.Key)
	}
	return string(b), err
}

func mustRead(t testing.TB, l *Layer, bucket, key, want string) {
	t.Helper()
	got, err := readString(l, bucket, key, "")
	if err != nil || got != want {
		t.Fatalf("GET %q = %q, %v; want %q", key, got, err, want)
	}
}

func mustBeGone(t testing.TB, l *Layer, bucket, key string) {
	t.Helper()
	if got, err := readString(l, bucket, key, ""); !errors.Is(err, ErrNoSuchKey) {
		t.Fatalf("GET %q = %q, %v; want NoSuchKey", key, got, err)
	}
}

func listAll(t testing.TB, l *Layer, bucket string, o ListOptions) ([]string, []string) {
	t.Helper()
	var keys, cps []string
	for page := 0; page < 100; page++ {
		res, err := l.ListObjects(context.Background(), bucket, o)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, keysOf(res)...)
		cps = append(cps, res.CommonPrefixes...)
		if !res.IsTruncated {
			return keys, cps
		}
		o.After = res.Next
	}
	t.Fatal("listing does not end")
	return nil, nil
}

// checkFilerClean checks that nothing is left: no entry below the bucket
// or in the hidden areas, and no blob alive once the collector ran.
func checkFilerClean(t *testing.T, l *Layer, bucket string) {
	t.Helper()
	ctx := context.Background()
	f := l.ns.(*filer.Filer)
	for _, dir := range []string{l.bucketPath(bucket), l.shadowsDir(bucket), l.versionsDir(bucket)} {
		es, _, err := f.ListEntries(ctx, dir, filer.ListOptions{Limit: 10})
		if err != nil && !errors.Is(err, filer.ErrNotFound) {
			t.Fatal(err)
		}
		if len(es) > 0 {
			t.Fatalf("%s still holds %s", dir, es[0].Path)
		}
	}
	if _, err := f.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestKeyAndPrefixInEveryOrder(t *testing.T) {
	keys := []string{"a", "a/", "a/b"}
	orders := [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	for _, state := range bucketStates {
		t.Run("state="+state, func(t *testing.T) {
			l, blobs := newTestLayer(t)
			ctx := context.Background()
			for i, order := range orders {
				bucket := fmt.Sprintf("bkt%d", i)
				newStateBucket(t, l, bucket, state)
				for _, j := range order {
					putString(t, l, bucket, keys[j], "body of "+keys[j])
				}
				for _, k := range keys {
					mustRead(t, l, bucket, k, "body of "+k)
				}
				got, cps := listAll(t, l, bucket, ListOptions{MaxKeys: 1000})
				if !slices.Equal(got, keys) || cps != nil {
					t.Fatalf("order %v: listing %q %q", order, got, cps)
				}
				got, cps = listAll(t, l, bucket, ListOptions{Delimiter: "/", MaxKeys: 1000})
				if !slices.Equal(got, []string{"a"}) || !slices.Equal(cps, []string{"a/"}) {
					t.Fatalf("order %v: listing with delimiter %q %q", order, got, cps)
				}
				// Page boundaries between each pair of keys.
				got, _ = listAll(t, l, bucket, ListOptions{MaxKeys: 1})
				if !slices.Equal(got, keys) {
					t.Fatalf("order %v: listing by pages of 1: %q", order, got)
				}
				got, cps = listAll(t, l, bucket, ListOptions{Delimiter: "/", MaxKeys: 1})
				if !slices.Equal(got, []string{"a"}) || !slices.Equal(cps, []string{"a/"}) {
					t.Fatalf("order %v: listing with delimiter by pages of 1: %q %q", order, got, cps)
				}
				// Overwrite each once more, then delete in this order.
				for _, j := range order {
					putString(t, l, bucket, keys[j], "new "+keys[j])
				}
				left := slices.Clone(keys)
				for _, j := range order {
					if err := l.DeleteObject(ctx, bucket, keys[j]); err != nil {
						t.Fatalf("order %v: delete %q: %v", order, keys[j], err)
					}
					left = slices.DeleteFunc(left, func(k string) bool { return k == keys[j] })
					mustBeGone(t, l, bucket, keys[j])
					for _, k := range left {
						mustRead(t, l, bucket, k, "new "+k)
					}
					if got, _ := listAll(t, l, bucket, ListOptions{MaxKeys: 1000}); !slices.Equal(got, left) {
						t.Fatalf("order %v: after deleting %q: listing %q, want %q", order, keys[j], got, left)
					}
				}
				if state == "" {
					checkFilerClean(t, l, bucket)
				}
			}
			if state == "" && len(blobs.Live()) != 0 {
				t.Fatalf("%d blobs left behind", len(blobs.Live()))
			}
		})
	}
}

// The filer sees an ordinary bucket unchanged; a colliding "a" is a
// directory whose object lives in the hidden area, and becomes the file
// again when "a/b" goes.
func TestShadowedObjectFilerView(t *testing.T) {
	l, blobs := newTestLayer(t)
	ctx := context.Background()
	f := l.ns.(*filer.Filer)
	newStateBucket(t, l, "bkt", "")
	putString(t, l, "bkt", "a", "file a")
	if e, err := f.FindEntry(ctx, "/buckets/bkt/a"); err != nil || e.IsDir() || e.Size != 6 {
		t.Fatalf("a is not a plain file: %+v %v", e, err)
	}
	putString(t, l, "bkt", "a/b", "file a/b")
	d, err := f.FindEntry(ctx, "/buckets/bkt/a")
	if err != nil || !d.IsDir() || len(d.Chunks) != 0 {
		t.Fatalf("a is not a plain directory now: %+v %v", d, err)
	}
	if e, err := f.FindEntry(ctx, "/buckets/bkt/a/b"); err != nil || e.IsDir() {
		t.Fatalf("a/b: %+v %v", e, err)
	}
	mustRead(t, l, "bkt", "a", "file a")
	if err := l.DeleteObject(ctx, "bkt", "a/b"); err != nil {
		t.Fatal(err)
	}
	e, err := f.FindEntry(ctx, "/buckets/bkt/a")
	if err != nil || e.IsDir() || e.Size != 6 || len(e.Xattrs[xaKey]) != 0 {
		t.Fatalf("a did not become the plain file again: %+v %v", e, err)
	}
	mustRead(t, l, "bkt", "a", "file a")
	if err := l.DeleteObject(ctx, "bkt", "a"); err != nil {
		t.Fatal(err)
	}
	checkFilerClean(t, l, "bkt")
	if err := l.DeleteBucket(ctx, "bkt"); err != nil {
		t.Fatal(err)
	}
	if n := len(blobs.Live()); n != 0 {
		t.Fatalf("%d blobs left", n)
	}
}

// Deep collisions: every ancestor of a key is an object too.
func TestDeepCollisions(t *testing.T) {
	for _, state := range bucketStates {
		l, _ := newTestLayer(t)
		newStateBucket(t, l, "bkt", state)
		keys := []string{"x", "x/y", "x/y/z", "x/y/z/w", "x/y/", "x/"}
		for _, k := range keys {
			putString(t, l, "bkt", k, k)
		}
		for _, k := range slices.Backward(keys) {
			putString(t, l, "bkt", k, "2"+k)
		}
		sorted := slices.Sorted(slices.Values(keys))
		if got, _ := listAll(t, l, "bkt", ListOptions{MaxKeys: 2}); !slices.Equal(got, sorted) {
			t.Fatalf("%s: listing %q", state, got)
		}
		if got, cps := listAll(t, l, "bkt", ListOptions{Prefix: "x/", Delimiter: "/", MaxKeys: 1}); !slices.Equal(got, []string{"x/", "x/y"}) || !slices.Equal(cps, []string{"x/y/"}) {
			t.Fatalf("%s: listing x/ with delimiter: %q %q", state, got, cps)
		}
		for _, k := range keys {
			mustRead(t, l, "bkt", k, "2"+k)
		}
	}
}

// Delete markers and noncurrent versions of "a" while "a/b" exists.
func TestVersionsOfAShadowedKey(t *testing.T) {
	l, _ := newTestLayer(t)
	ctx := context.Background()
	newStateBucket(t, l, "bkt", VersioningEnabled)
	v1 := putString(t, l, "bkt", "a", "a v1").VersionID
	putString(t, l, "bkt", "a/b", "a/b v1")
	v2 := putString(t, l, "bkt", "a", "a v2").VersionID
	mustRead(t, l, "bkt", "a", "a v2")
	if got, err := readString(l, "bkt", "a", v1); err != nil || got != "a v1" {
		t.Fatalf("a version 1: %q %v", got, err)
	}
	res, err := l.DeleteObjectVersion(ctx, "bkt", "a", "")
	if err != nil || !res.DeleteMarker {
		t.Fatalf("delete a: %+v %v", res, err)
	}
	dm := res.VersionID
	var dmErr *DeleteMarkerError
	if _, err := readString(l, "bkt", "a", ""); !errors.As(err, &dmErr) || dmErr.VersionID != dm {
		t.Fatalf("GET a after its delete marker: %v", err)
	}
	mustRead(t, l, "bkt", "a/b", "a/b v1")
	if got, cps := listAll(t, l, "bkt", ListOptions{Delimiter: "/", MaxKeys: 1000}); got != nil || !slices.Equal(cps, []string{"a/"}) {
		t.Fatalf("listing hides a: %q %q", got, cps)
	}
	vr, err := l.ListObjectVersions(ctx, "bkt", ListVersionsOptions{MaxKeys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vr.Versions {
		got = append(got, fmt.Sprintf("%s %s %v %v", v.Key, v.VersionID, v.IsLatest, v.DeleteMarker))
	}
	want := []string{"a " + dm + " true true", "a " + v2 + " false false", "a " + v1 + " false false", "a/b " + vr.Versions[3].VersionID + " true false"}
	if !slices.Equal(got, want) {
		t.Fatalf("versions:\n got %q\nwant %q", got, want)
	}
	// Paged by one, with version markers.
	var paged []string
	o := ListVersionsOptions{MaxKeys: 1}
	for {
		vr, err := l.ListObjectVersions(ctx, "bkt", o)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vr.Versions {
			paged = append(paged, fmt.Sprintf("%s %s %v %v", v.Key, v.VersionID, v.IsLatest, v.DeleteMarker))
		}
		if !vr.IsTruncated {
			break
		}
		o.KeyMarker, o.VersionIDMarker = vr.NextKeyMarker, vr.NextVersionIDMarker
	}
	if !slices.Equal(paged, want) {
		t.Fatalf("versions by pages of 1:\n got %q\nwant %q", paged, want)
	}
	// Removing the marker brings v2 back; removing a/b's only version
	// leaves a alone (a plain file again) with its versions.
	if _, err := l.DeleteObjectVersion(ctx, "bkt", "a", dm); err != nil {
		t.Fatal(err)
	}
	mustRead(t, l, "bkt", "a", "a v2")
	if _, err := l.DeleteObjectVersion(ctx, "bkt", "a/b", vr.Versions[3].VersionID); err != nil {
		t.Fatal(err)
	}
	mustBeGone(t, l, "bkt", "a/b")
	if e, err := l.ns.FindEntry(ctx, "/buckets/bkt/a"); err != nil || e.IsDir() {
		t.Fatalf("a is not the plain file again: %+v %v", e, err)
	}
	if got, err := readString(l, "bkt", "a", v1); err != nil || got != "a v1" {
		t.Fatalf("a version 1: %q %v", got, err)
	}
	// A delete marker at "a" while nothing else is: a/b written after it
	// makes the marker the shadowed one.
	res, _ = l.DeleteObjectVersion(ctx, "bkt", "a", "")
	putString(t, l, "bkt", "a/b", "a/b v2")
	if _, err := readString(l, "bkt", "a", ""); !errors.As(err, &dmErr) || dmErr.VersionID != res.VersionID {
		t.Fatalf("GET a after its delete marker: %v", err)
	}
	for _, v := range []string{res.VersionID, v2, v1} {
		if _, err := l.DeleteObjectVersion(ctx, "bkt", "a", v); err != nil {
			t.Fatal(err)
		}
	}
	mustBeGone(t, l, "bkt", "a")
	mustRead(t, l, "bkt", "a/b", "a/b v2")
}

func TestMultipartAndCopyOntoCollidingKeys(t *testing.T) {
	for _, state := range bucketStates {
		l, _ := newTestLayer(t)
		ctx := context.Background()
		newStateBucket(t, l, "bkt", state)
		complete := func(key, body string) {
			t.Helper()
			id, err := l.CreateMultipartUpload(ctx, "bkt", key, Metadata{}, "", "")
			if err != nil {
				t.Fatal(err)
			}
			p, err := l.UploadPart(ctx, "bkt", key, id, 1, strings.NewReader(body), PartOptions{Size: int64(len(body))})
			if err != nil {
				t.Fatal(err)
			}
			oi, err := l.CompleteMultipartUpload(ctx, "bkt", key, id, []CompletePart{{1, p.ETag}}, CompleteOptions{})
			if err != nil || oi.Key != key {
				t.Fatalf("complete %q: %+v %v", key, oi, err)
			}
		}
		putString(t, l, "bkt", "a/b", "a/b")
		complete("a", "multipart a")
		complete("a/b/c", "multipart a/b/c")
		complete("a/", "multipart a/")
		for k, want := range map[string]string{"a": "multipart a", "a/b": "a/b", "a/b/c": "multipart a/b/c", "a/": "multipart a/"} {
			mustRead(t, l, "bkt", k, want)
		}
		if _, err := l.CopyObject(ctx, "bkt", "a/b/c", "bkt", "a/b", CopyOptions{}); err != nil {
			t.Fatal(err)
		}
		if oi, err := l.CopyObject(ctx, "bkt", "a/b", "bkt", "a", CopyOptions{}); err != nil || oi.Key != "a" {
			t.Fatalf("copy onto a: %+v %v", oi, err)
		}
		mustRead(t, l, "bkt", "a", "multipart a/b/c")
		// Metadata-only copy of a shadowed object onto itself.
		if oi, err := l.CopyObject(ctx, "bkt", "a", "bkt", "a", CopyOptions{Replace: true, Metadata: Metadata{ContentType: "text/x"}}); err != nil || oi.Key != "a" || oi.ContentType != "text/x" {
			t.Fatalf("copy a onto itself: %+v %v", oi, err)
		}
		if err := l.PutObjectTagging(ctx, "bkt", "a", "", []Tag{{"k", "v"}}); err != nil {
			t.Fatal(err)
		}
		if tags, err := l.GetObjectTagging(ctx, "bkt", "a", ""); err != nil || len(tags) != 1 {
			t.Fatalf("tags of a: %v %v", tags, err)
		}
		if tags, err := l.GetObjectTagging(ctx, "bkt", "a/b", ""); err != nil || len(tags) != 0 {
			t.Fatalf("tags of a/b: %v %v", tags, err)
		}
		if err := l.SetObjectACL(ctx, "bkt", "a", "", ACLPublicRead); err != nil {
			t.Fatal(err)
		}
		o, err := l.GetObject(ctx, "bkt", "a", GetOptions{NoBody: true})
		if err != nil || o.Info.ACL != ACLPublicRead || o.Info.ContentType != "text/x" {
			t.Fatalf("head a: %+v %v", o, err)
		}
		if o, err := l.GetObject(ctx, "bkt", "a/b", GetOptions{NoBody: true}); err != nil || o.Info.ACL != ACLPrivate {
			t.Fatalf("head a/b: %+v %v", o, err)
		}
		// If-None-Match: * sees the shadowed object, and only it.
		_, err = l.PutObject(ctx, "bkt", "a", strings.NewReader("x"), PutOptions{Size: 1, IfNoneMatch: "*"})
		if !errors.Is(err, ErrPreconditionFailed) {
			t.Fatalf("%s: exclusive put over a: %v", state, err)
		}
		if _, err := l.PutObject(ctx, "bkt", "a/b/c/d", strings.NewReader("x"), PutOptions{Size: 1, IfNoneMatch: "*"}); err != nil {
			t.Fatalf("%s: exclusive put of a new key below a/b/c: %v", state, err)
		}
		mustRead(t, l, "bkt", "a/b/c", "multipart a/b/c")
	}
}

// TestRandomKeysMatchModel puts and deletes random keys from a small
// alphabet that collide in every way, in each versioning state, and
// compares GETs, listings (random prefixes, delimiters and page sizes,
// paged with the returned markers) and, for versioned buckets, the
// versions of each key with a model of S3.
func TestRandomKeysMatchModel(t *testing.T) {
	alphabet := []string{"a", "a!", "a/", "a/b", "a/b/", "a/b/c", "ab", "b/a", "a/b!"}
	prefixes := []string{"", "a", "a/", "a/b", "a/b/", "b", "a!", "c"}
	delims := []string{"", "/", "b", "!"}
	for _, state := range bucketStates {
		t.Run("state="+state, func(t *testing.T) {
			l, blobs := newTestLayer(t)
			ctx := context.Background()
			newStateBucket(t, l, "bkt", state)
			rng := rand.New(rand.NewPCG(7, uint64(len(state))))
			cur := map[string]string{} // latest content of live keys
			type ver struct {
				null, dm bool
			}
			vers := map[string][]ver{} // newest first
			for step := 0; step < 300; step++ {
				k := alphabet[rng.IntN(len(alphabet))]
				dirKey := strings.HasSuffix(k, "/")
				if rng.IntN(3) == 0 {
					if err := l.DeleteObject(ctx, "bkt", k); err != nil {
						t.Fatalf("step %d: delete %q: %v", step, k, err)
					}
					delete(cur, k)
					switch {
					case state == "" || dirKey:
						delete(vers, k)
					case state == VersioningEnabled:
						vers[k] = append([]ver{{dm: true}}, vers[k]...)
					default:
						vers[k] = append([]ver{{null: true, dm: true}}, slices.DeleteFunc(vers[k], func(v ver) bool { return v.null })...)
					}
				} else {
					body := fmt.Sprintf("%s@%d", k, step)
					putString(t, l, "bkt", k, body)
					cur[k] = body
					switch {
					case state == "" || dirKey:
						vers[k] = []ver{{null: true}}
					case state == VersioningEnabled:
						vers[k] = append([]ver{{}}, vers[k]...)
					default:
						vers[k] = append([]ver{{null: true}}, slices.DeleteFunc(vers[k], func(v ver) bool { return v.null })...)
					}
				}
				for _, k := range alphabet {
					got, err := readString(l, "bkt", k, "")
					want, ok := cur[k]
					if ok && (err != nil || got != want) || !ok && !errors.Is(err, ErrNoSuchKey) {
						t.Fatalf("step %d: GET %q = %q, %v; want %q (present %v)", step, k, got, err, want, ok)
					}
				}
				checkShadowFlags(t, l, "bkt")
				live := slices.Sorted(func(yield func(string) bool) {
					for k := range cur {
						if !yield(k) {
							return
						}
					}
				})
				o := ListOptions{Prefix: prefixes[rng.IntN(len(prefixes))], Delimiter: delims[rng.IntN(len(delims))], MaxKeys: 1 + rng.IntN(4)}
				if rng.IntN(3) == 0 {
					o.After = alphabet[rng.IntN(len(alphabet))]
				}
				for page := 0; ; page++ {
					got, err := l.ListObjects(ctx, "bkt", o)
					if err != nil {
						t.Fatal(err)
					}
					want := model(live, o)
					if !slices.Equal(keysOf(got), keysOf(want)) || !slices.Equal(got.CommonPrefixes, want.CommonPrefixes) ||
						got.IsTruncated != want.IsTruncated || got.IsTruncated && got.Next != want.Next {
						t.Fatalf("step %d, %+v page %d, live %q:\n got  %q %q %v %q\n want %q %q %v %q", step, o, page, live,
							keysOf(got), got.CommonPrefixes, got.IsTruncated, got.Next,
							keysOf(want), want.CommonPrefixes, want.IsTruncated, want.Next)
					}
					if !got.IsTruncated {
						break
					}
					o.After = got.Next
				}
				if state == "" {
					continue
				}
				var gotV, wantV []string
				vo := ListVersionsOptions{MaxKeys: 1 + rng.IntN(5)}
				for {
					vr, err := l.ListObjectVersions(ctx, "bkt", vo)
					if err != nil {
						t.Fatal(err)
					}
					for _, v := range vr.Versions {
						gotV = append(gotV, fmt.Sprintf("%s null=%v dm=%v latest=%v", v.Key, v.VersionID == NullVersion, v.DeleteMarker, v.IsLatest))
					}
					if !vr.IsTruncated {
						break
					}
					vo.KeyMarker, vo.VersionIDMarker = vr.NextKeyMarker, vr.NextVersionIDMarker
				}
				keys := make([]string, 0, len(vers))
				for k := range vers {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					for i, v := range vers[k] {
						wantV = append(wantV, fmt.Sprintf("%s null=%v dm=%v latest=%v", k, v.null, v.dm, i == 0))
					}
				}
				if !slices.Equal(gotV, wantV) {
					t.Fatalf("step %d: versions\n got %q\nwant %q", step, gotV, wantV)
				}
			}
			// Remove everything: nothing may be left, in the namespace or
			// as blobs.
			for {
				vr, err := l.ListObjectVersions(ctx, "bkt", ListVersionsOptions{MaxKeys: 1000})
				if err != nil {
					t.Fatal(err)
				}
				if len(vr.Versions) == 0 {
					break
				}
				for _, v := range vr.Versions {
					if _, err := l.DeleteObjectVersion(ctx, "bkt", v.Key, v.VersionID); err != nil {
						t.Fatal(err)
					}
				}
			}
			checkFilerClean(t, l, "bkt")
			if err := l.DeleteBucket(ctx, "bkt"); err != nil {
				t.Fatal(err)
			}
			if n := len(blobs.Live()); n != 0 {
				t.Fatalf("%d blobs left", n)
			}
		})
	}
}

// Concurrent writers and deleters of colliding keys leave a consistent
// namespace: every key reads as one of the bodies written for it or not
// at all, the listing shows exactly the readable keys, every flagged
// directory has its shadowed object and every shadowed object its flag,
// and removing everything leaves nothing behind.
func TestConcurrentCollidingKeys(t *testing.T) {
	alphabet := []string{"a", "a/", "a/b", "a/b/c", "a/b/"}
	for _, state := range []string{"", VersioningEnabled} {
		l, blobs := newTestLayer(t)
		ctx := context.Background()
		newStateBucket(t, l, "bkt", state)
		errs := make(chan error, 4)
		for w := range 4 {
			go func() {
				rng := rand.New(rand.NewPCG(uint64(w), 9))
				for i := range 40 {
					k := alphabet[rng.IntN(len(alphabet))]
					var err error
					if rng.IntN(3) == 0 {
						err = l.DeleteObject(ctx, "bkt", k)
					} else {
						body := fmt.Sprintf("%s@%d.%d", k, w, i)
						_, err = l.PutObject(ctx, "bkt", k, strings.NewReader(body), PutOptions{Size: int64(len(body))})
					}
					if err != nil {
						errs <- fmt.Errorf("worker %d op %d on %q: %w", w, i, k, err)
						return
					}
				}
				errs <- nil
			}()
		}
		for range 4 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		var readable []string
		for _, k := range alphabet {
			got, err := readString(l, "bkt", k, "")
			switch {
			case errors.Is(err, ErrNoSuchKey):
			case err != nil || !strings.HasPrefix(got, k+"@"):
				t.Fatalf("%s: GET %q = %q, %v", state, k, got, err)
			default:
				readable = append(readable, k)
			}
		}
		sort.Strings(readable)
		if got, _ := listAll(t, l, "bkt", ListOptions{MaxKeys: 1000}); !slices.Equal(got, readable) {
			t.Fatalf("%s: listing %q, readable %q", state, got, readable)
		}
		checkShadowFlags(t, l, "bkt")
		for {
			vr, err := l.ListObjectVersions(ctx, "bkt", ListVersionsOptions{MaxKeys: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if len(vr.Versions) == 0 {
				break
			}
			for _, v := range vr.Versions {
				vid := v.VersionID
				if state == "" {
					vid = ""
				}
				if _, err := l.DeleteObjectVersion(ctx, "bkt", v.Key, vid); err != nil {
					t.Fatal(err)
				}
			}
		}
		checkFilerClean(t, l, "bkt")
		if n := len(blobs.Live()); n != 0 {
			t.Fatalf("%s: %d blobs left", state, n)
		}
	}
}

// checkShadowFlags checks that the flagged directories of a bucket and
// its shadowed objects match one to one.
func checkShadowFlags(t *testing.T, l *Layer, bucket string) {
	t.Helper()
	ctx := context.Background()
	flagged := map[string]bool{}
	var walk func(dir string)
	walk = func(dir string) {
		es, _, err := l.ns.ListEntries(ctx, dir, filer.ListOptions{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if e.IsDir() {
				if hasShadow(e) {
					flagged[l.shadowPath(bucket, keyOf(l.bucketPath(bucket), e, false))] = true
				}
				walk(e.Path)
			}
		}
	}
	walk(l.bucketPath(bucket))
	es, _, err := l.ns.ListEntries(ctx, l.shadowsDir(bucket), filer.ListOptions{Limit: 1000})
	if err != nil && !errors.Is(err, filer.ErrNotFound) {
		t.Fatal(err)
	}
	for _, e := range es {
		if !flagged[e.Path] {
			t.Fatalf("shadowed object %s (key %q) without a flagged directory", e.Path, e.Xattrs[xaKey])
		}
		delete(flagged, e.Path)
	}
	for p := range flagged {
		t.Fatalf("flagged directory without its object %s", p)
	}
}

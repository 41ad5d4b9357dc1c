package objectapi

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/kelpfs/kelp/internal/filer"
)

// ListOptions select a page of ListObjects.
type ListOptions struct {
	Prefix    string
	Delimiter string
	// After lists keys (and common prefixes) sorting after it: the V1
	// marker, the V2 start-after or continuation token.
	After   string
	MaxKeys int // at most this many objects plus common prefixes; <= 0: none
}

// ListResult is one page of a listing, in key order.
type ListResult struct {
	Objects        []ObjectInfo
	CommonPrefixes []string
	IsTruncated    bool
	// Next is the last key or common prefix of a truncated page: the
	// NextMarker, and what the continuation token encodes.
	Next string
}

// pageSize is how many entries one namespace call returns.
const pageSize = 1000

var errStop = errors.New("objectapi: listing page full")

// ListObjects lists a bucket in S3 key order (bytewise UTF-8).
//
// The namespace lists a directory's children in name order, but a
// directory "a" holds keys "a/..." which sort after a sibling "a.txt" (as
// '.' < '/'). The walk therefore holds back each directory until the names
// read pass its key ("a/"), in a small ordered queue, and enters it (or,
// with delimiter "/", reports it as a common prefix) then. A marker is
// turned into a starting name per level, so a page costs a few namespace
// calls whatever its position.
func (l *Layer) ListObjects(ctx context.Context, bucket string, opts ListOptions) (ListResult, error) {
	b, err := l.bucketEntry(ctx, bucket)
	if err != nil {
		return ListResult{}, err
	}
	ls := &lister{l: l, ctx: ctx, bucket: bucket, prefix: opts.Prefix, delim: opts.Delimiter, after: opts.After, max: opts.MaxKeys,
		checkLive: versioningOf(b) != ""}
	if opts.MaxKeys <= 0 {
		return ls.res, nil
	}
	if err := ls.run(); err != nil {
		return ListResult{}, err
	}
	return ls.res, nil
}

// run walks the keys with ls.prefix into ls.res (or ls.ver).
func (ls *lister) run() error {
	bdir := ls.l.bucketPath(ls.bucket)
	dirKey, namePrefix := "", ls.prefix
	if i := strings.LastIndexByte(ls.prefix, '/'); i >= 0 {
		dirKey, namePrefix = ls.prefix[:i+1], ls.prefix[i+1:]
	}
	dir := bdir
	if dirKey != "" {
		if checkKey(dirKey) != nil {
			return nil // no stored key can have this prefix
		}
		dir = bdir + "/" + strings.TrimSuffix(dirKey, "/")
	}
	d, err := ls.l.ns.FindEntry(ls.ctx, dir)
	if errors.Is(err, filer.ErrNotFound) || errors.Is(err, filer.ErrNotDir) || err == nil && !d.IsDir() {
		return nil
	}
	if err != nil {
		return err
	}
	if dirKey != "" && namePrefix == "" && isDirObject(d) {
		err = ls.add(dirKey, d, false)
	}
	if err == nil {
		err = ls.walk(dir, dirKey, namePrefix)
	}
	if err != nil && !errors.Is(err, errStop) {
		return err
	}
	return nil
}

type lister struct {
	l      *Layer
	ctx    context.Context
	bucket string
	prefix string
	delim  string
	after  string
	max    int
	n      int
	lastCP string
	res    ListResult
	// checkLive hides delete markers, and directories holding only
	// delete markers (versioned buckets).
	checkLive bool
	// ver, when set, lists versions (ListObjectVersions) into it; then
	// versioned says whether to read noncurrent versions too.
	ver       *ListVersionsResult
	versioned bool
}

// add reports one key (or, with isPrefix, a common prefix) in order.
func (ls *lister) add(key string, e *filer.Entry, isPrefix bool) error {
	if !strings.HasPrefix(key, ls.prefix) {
		return nil
	}
	if !isPrefix && ls.ver == nil && isDeleteMarker(e) {
		return nil
	}
	fromDir := isPrefix
	if !isPrefix && ls.delim != "" {
		rest := key[len(ls.prefix):]
		if i := strings.Index(rest, ls.delim); i >= 0 {
			key, isPrefix = ls.prefix+rest[:i+len(ls.delim)], true
		}
	}
	if key <= ls.after || isPrefix && key == ls.lastCP {
		return nil
	}
	if fromDir && ls.checkLive {
		live, err := ls.hasLive(e)
		if err != nil || !live {
			return err
		}
	}
	if ls.ver != nil && !isPrefix {
		return ls.addVersions(key, e)
	}
	if ls.n == ls.max {
		ls.res.IsTruncated = true
		return errStop
	}
	ls.n++
	ls.res.Next = key
	if isPrefix {
		ls.lastCP = key
		ls.res.CommonPrefixes = append(ls.res.CommonPrefixes, key)
		if ls.ver != nil {
			ls.ver.NextKeyMarker, ls.ver.NextVersionIDMarker = key, ""
		}
	} else {
		ls.res.Objects = append(ls.res.Objects, ls.l.info(ls.bucket, e))
	}
	return nil
}

// walk reports the keys below directory dir, whose keys start with
// dirKey, among the children whose names start with namePrefix.
func (ls *lister) walk(dir, dirKey, namePrefix string) error {
	// Names up to the component of after at this level (lower) hold only
	// keys <= after, except a directory named by a proper prefix of lower
	// followed there by a byte below '/': its keys sort as name+"/", after
	// names with that smaller byte ("a/" > "a.txt"), so after lower too.
	// Those few names (below) are looked up one by one and the scan starts
	// at lower: a page starting in a large directory ("key-00500000" in a
	// million "key-..." names) reads what it lists, not every name from
	// the stem "key" on.
	lower := ""
	var below []string
	if strings.HasPrefix(ls.after, dirKey) {
		lower, _, _ = strings.Cut(ls.after[len(dirKey):], "/")
		for k := 1; k < len(lower); k++ {
			if lower[k] < '/' {
				below = append(below, lower[:k])
			}
		}
	} else if ls.after > dirKey {
		return nil // every key here sorts before after
	}
	var pend []*filer.Entry // held-back directories, ordered by key
	dkey := func(e *filer.Entry) string { return dirKey + e.Name() + "/" }
	flush := func(bound string, all bool) error {
		for len(pend) > 0 && (all || dkey(pend[0]) < bound) {
			d := pend[0]
			pend = pend[1:]
			if err := ls.dir(d, dkey(d)); err != nil {
				return err
			}
		}
		return nil
	}
	visit := func(e *filer.Entry) error {
		if err := flush(dirKey+e.Name(), false); err != nil {
			return err
		}
		if e.IsDir() {
			if hasShadow(e) {
				// The key without the '/' is an object kept apart: it
				// sorts where a file of that name would.
				if err := ls.shadowed(dirKey + e.Name()); err != nil {
					return err
				}
			}
			k := dkey(e)
			i, _ := slices.BinarySearchFunc(pend, k, func(x *filer.Entry, k string) int { return strings.Compare(dkey(x), k) })
			pend = slices.Insert(pend, i, e)
			return nil
		}
		return ls.add(dirKey+e.Name(), e, false)
	}
	for _, name := range below {
		if !strings.HasPrefix(name, namePrefix) {
			continue
		}
		e, err := ls.l.ns.FindEntry(ls.ctx, filer.JoinPath(dir, name))
		if err == nil && e.IsDir() {
			if err := visit(e); err != nil {
				return err
			}
		} else if err != nil && !errors.Is(err, filer.ErrNotFound) && !errors.Is(err, filer.ErrInvalidPath) {
			return err
		}
	}
	start := ""
	if lower > namePrefix || strings.HasPrefix(lower, namePrefix) && lower != "" {
		e, err := ls.l.ns.FindEntry(ls.ctx, filer.JoinPath(dir, lower))
		if err == nil && strings.HasPrefix(lower, namePrefix) {
			if err := visit(e); err != nil {
				return err
			}
		} else if err != nil && !errors.Is(err, filer.ErrNotFound) && !errors.Is(err, filer.ErrInvalidPath) {
			return err
		}
		start = lower
	}
	for {
		es, more, err := ls.l.ns.ListEntries(ls.ctx, dir, filer.ListOptions{StartAfter: start, Prefix: namePrefix, Limit: ls.fetchLimit()})
		if errors.Is(err, filer.ErrNotFound) {
			return nil // removed meanwhile
		}
		if err != nil {
			return err
		}
		ls.reserve(len(es))
		for _, e := range es {
			start = e.Name()
			if err := visit(e); err != nil {
				return err
			}
		}
		if !more {
			break
		}
	}
	return flush("", true)
}

// fetchLimit is how many entries to read from the namespace next: what
// the page still needs plus the one that tells it is truncated, not a
// whole namespace page (a page that ends a few keys into a directory read
// a thousand entries there, most of them only to drop them). The floor
// keeps the calls few where entries are skipped (delete markers, hidden
// files) or rolled up into a common prefix.
func (ls *lister) fetchLimit() int {
	return min(max(ls.max-ls.n+1, minFetch), pageSize)
}

// minFetch is the fewest entries one namespace call asks for.
const minFetch = 32

// reserve makes room for the objects n more entries can add, so that a
// page of large ObjectInfos is not copied as it grows.
func (ls *lister) reserve(n int) {
	n = min(n, ls.max-ls.n)
	if ls.ver != nil {
		ls.ver.Versions = slices.Grow(ls.ver.Versions, n)
	} else {
		ls.res.Objects = slices.Grow(ls.res.Objects, n)
	}
}

// dir reports directory d, whose keys start with key: as a common prefix
// with delimiter "/", else as its own object (if marked) and its content.
func (ls *lister) dir(d *filer.Entry, key string) error {
	if ls.delim == "/" {
		return ls.add(key, d, true)
	}
	if isDirObject(d) {
		if err := ls.add(key, d, false); err != nil {
			return err
		}
	}
	if ls.after > key && !strings.HasPrefix(ls.after, key) {
		return nil
	}
	if ls.delim != "" && ls.lastCP != "" && strings.HasPrefix(key, ls.lastCP) {
		return nil // rolled up into the prefix just reported
	}
	return ls.walk(d.Path, key, "")
}

// hasLive reports whether directory d is an object or holds one that is
// not a delete marker, at any depth.
func (ls *lister) hasLive(d *filer.Entry) (bool, error) {
	if isDirObject(d) {
		return true, nil
	}
	after := ""
	for {
		es, more, err := ls.l.ns.ListEntries(ls.ctx, d.Path, filer.ListOptions{StartAfter: after, Limit: pageSize})
		if errors.Is(err, filer.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		for _, e := range es {
			after = e.Name()
			if !e.IsDir() {
				if !isDeleteMarker(e) {
					return true, nil
				}
				continue
			}
			if hasShadow(e) {
				v, err := ls.l.shadowedVersion(ls.ctx, ls.bucket, keyOf(ls.l.bucketPath(ls.bucket), e, false))
				if err != nil {
					return false, err
				}
				if v != nil && !isDeleteMarker(v) {
					return true, nil
				}
			}
			if live, err := ls.hasLive(e); live || err != nil {
				return live, err
			}
		}
		if !more {
			return false, nil
		}
	}
}

// shadowed reports the object key kept apart from its directory
// (shadow.go), if the listing may include it.
func (ls *lister) shadowed(key string) error {
	if key <= ls.after || !strings.HasPrefix(key, ls.prefix) {
		return nil
	}
	v, err := ls.l.shadowedVersion(ls.ctx, ls.bucket, key)
	if err != nil || v == nil {
		return err
	}
	return ls.add(key, v, false)
}

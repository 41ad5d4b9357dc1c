package objectapi

import (
	"context"
	"crypto/md5"
	"errors"
	"hash"
	"io"
	"maps"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/filer"
	"github.com/kelpfs/kelp/internal/sse"
)

// SystemHeaders are the response headers stored with an object besides
// Content-Type, lower-case.
var systemHeaders = [...]string{"content-encoding", "content-disposition", "content-language", "cache-control", "expires"}

// SystemHeaders returns the names of the stored standard headers.
func SystemHeaders() []string { return systemHeaders[:] }

// MaxPutSize is the largest object a single PUT (or one part) may carry.
const MaxPutSize = 5 << 30

// ObjectInfo describes an object.
type ObjectInfo struct {
	Bucket, Key  string
	Size         int64
	ETag         string // without quotes
	LastModified time.Time
	ContentType  string
	Headers      map[string]string // stored standard headers, by lower-case name
	UserMeta     map[string]string // x-amz-meta-* by lower-case name without the prefix
	Checksum     Checksum
	TagCount     int
	Parts        int // parts of a multipart object, 0 otherwise
	// VersionID is the version's id; "" for a null version unless the
	// call knew the bucket to be versioned (then "null"), so that the
	// gateway sends x-amz-version-id only for versioned buckets.
	VersionID    string
	IsLatest     bool    // set by ListObjectVersions
	DeleteMarker bool    // set by ListObjectVersions
	ACL          string  // canned ACL, "private" when none was set
	Grants       []Grant // explicit ACL (nil: ACL is canned)
	Owner        string  // owner's canonical id ("" the bucket's owner)
	PartSizes    []int64 // sizes of a multipart object's parts, nil otherwise
	Lock         ObjectLock

	// SSE is the object's server-side encryption, nil when not encrypted.
	SSE *sse.Meta

	entry *filer.Entry
}

// Metadata is what a writer sets on an object.
type Metadata struct {
	ContentType string
	Headers     map[string]string // lower-case standard header names (SystemHeaders)
	UserMeta    map[string]string // lower-case names without x-amz-meta-
	Tags        string            // URL query encoding (x-amz-tagging); "" none
	// ACL is the object's canned ACL ("" or "private": the bucket's
	// access alone), Grants its explicit ACL instead (when not nil), Owner
	// its owner's canonical id ("" the bucket's owner). Never copied from
	// a source object, as in S3.
	ACL    string
	Grants []Grant
	Owner  string
	// Lock is the retention and legal hold of the new version (only in a
	// bucket with object lock). Never copied from a source object.
	Lock ObjectLock
	// Encryption, when set, encrypts the content (encryption.go). Never
	// copied from a source object: the gateway decides for each write.
	Encryption *Encryption
}

// PutOptions describe an object written by PutObject.
type PutOptions struct {
	Metadata
	Size       int64  // content length, or -1 when unknown
	ContentMD5 []byte // expected MD5 (Content-MD5), nil none
	Checksum   ChecksumSpec
	// IfNoneMatch "*" fails with ErrPreconditionFailed when the key exists,
	// a list of ETags when the current object has one of them; IfMatch
	// requires the current object to have that ETag; IfUnmodifiedSince
	// as in WriteConditions.
	IfNoneMatch       string
	IfMatch           string
	IfUnmodifiedSince time.Time
}

func isDirObject(e *filer.Entry) bool { return e.IsDir() && string(e.Xattrs[xaObject]) == "1" }

func (l *Layer) info(bucket string, e *filer.Entry) ObjectInfo {
	dirObj := e.IsDir()
	oi := ObjectInfo{
		Bucket: bucket, Key: keyOf(l.bucketPath(bucket), e, dirObj),
		Size: e.Size, LastModified: e.Mtime, ContentType: e.Mime, entry: e,
		VersionID: string(e.Xattrs[xaVID]), DeleteMarker: isDeleteMarker(e),
	}
	if v := e.Xattrs[xaETag]; len(v) > 0 {
		oi.ETag = string(v)
		if i := strings.LastIndexByte(oi.ETag, '-'); i > 0 {
			oi.Parts = atoiOr(oi.ETag[i+1:], 0)
		}
	} else {
		oi.ETag = e.ETag()
	}
	for k, v := range e.Meta {
		if name, ok := strings.CutPrefix(k, "x-amz-meta-"); ok {
			if oi.UserMeta == nil {
				oi.UserMeta = map[string]string{}
			}
			oi.UserMeta[name] = v
		} else {
			if oi.Headers == nil {
				oi.Headers = map[string]string{}
			}
			oi.Headers[k] = v
		}
	}
	oi.Checksum = decodeChecksum(e.Xattrs[xaChecksum])
	oi.PartSizes = partSizes(e)
	if m := sseMeta(e); m != nil {
		oi.SSE, oi.Size = m, m.PlainSize()
	}
	a := accessOf(e)
	oi.ACL, oi.Grants, oi.Owner = a.Canned, a.Grants, a.Owner
	oi.Lock = lockOf(e)
	if t := e.Xattrs[xaTags]; len(t) > 0 {
		if q, err := url.ParseQuery(string(t)); err == nil {
			oi.TagCount = len(q)
		}
	}
	return oi
}

// applyMeta sets md on e (replacing all previous metadata and tags).
func applyMeta(e *filer.Entry, md Metadata) {
	e.Mime = md.ContentType
	e.Meta = make(map[string]string, len(md.Headers)+len(md.UserMeta))
	for _, k := range systemHeaders {
		if v, ok := md.Headers[k]; ok && v != "" {
			e.Meta[k] = v
		}
	}
	for k, v := range md.UserMeta {
		e.Meta["x-amz-meta-"+strings.ToLower(k)] = v
	}
	if e.Xattrs == nil {
		e.Xattrs = map[string][]byte{}
	}
	if md.Tags != "" {
		e.Xattrs[xaTags] = []byte(md.Tags)
	} else {
		delete(e.Xattrs, xaTags)
	}
	setAccess(e, Access{Owner: md.Owner, Canned: md.ACL, Grants: md.Grants})
	setLock(e, md.Lock)
}

// metadataOf returns an object's metadata for a copy.
func metadataOf(oi ObjectInfo) Metadata {
	md := Metadata{ContentType: oi.ContentType, Headers: maps.Clone(oi.Headers), UserMeta: maps.Clone(oi.UserMeta)}
	if oi.entry != nil {
		md.Tags = string(oi.entry.Xattrs[xaTags])
	}
	return md
}

// findObject returns the entry of an object's latest version; implicit
// directories (not marked as objects) and files reached by a key ending
// in '/' are ErrNoSuchKey.
func (l *Layer) findObject(ctx context.Context, bucket, key string) (*filer.Entry, error) {
	p, dirKey, err := l.objectPath(bucket, key)
	if err != nil {
		if errors.Is(err, ErrUnsupportedKey) {
			return nil, errorf(ErrNoSuchKey, "%q", key)
		}
		return nil, err
	}
	var e *filer.Entry
	if dirKey {
		e, err = l.ns.FindEntry(ctx, p)
		if err == nil && !isDirObject(e) {
			err = filer.ErrNotFound
		}
	} else {
		var s slot
		s, err = l.locateNow(ctx, bucket, key)
		if e = s.cur; err == nil && e == nil {
			err = filer.ErrNotFound
		}
	}
	if errors.Is(err, filer.ErrNotFound) || errors.Is(err, filer.ErrNotDir) {
		if _, berr := l.bucketEntry(ctx, bucket); berr != nil {
			return nil, berr
		}
		return nil, errorf(ErrNoSuchKey, "%q", key)
	}
	if err == nil && isDeleteMarker(e) {
		return nil, &DeleteMarkerError{VersionID: versionIDOf(e), Kind: errorf(ErrNoSuchKey, "%q", key)}
	}
	return e, err
}

// countingHasher computes a checksum of what passes through it.
type hashingReader struct {
	r io.Reader
	h hash.Hash
}

func (h *hashingReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.h.Write(p[:n])
	return n, err
}

// upload is the result of streaming content to the blob layer.
type upload struct {
	chunks   []chunk.Chunk
	size     int64  // stored bytes
	md5      []byte // of the plaintext, or of the stored bytes when encrypted other than SSE-S3
	checksum Checksum
	// plain is the plaintext size and part the encryption of what was
	// stored (nil: not encrypted).
	plain int64
	part  *sse.Part
}

// store streams r into chunks, verifying sizes and digests; on error no
// blob is left behind.
func (l *Layer) store(ctx context.Context, r io.Reader, size int64, wantMD5 []byte, cs ChecksumSpec, enc *encryptingPart) (*upload, error) {
	return l.storeOpts(ctx, r, size, wantMD5, cs, true, enc)
}

func (l *Layer) storeOpts(ctx context.Context, r io.Reader, size int64, wantMD5 []byte, cs ChecksumSpec, pack bool, enc *encryptingPart) (*upload, error) {
	if size > MaxPutSize {
		return nil, errorf(ErrEntityTooLarge, "%d bytes exceeds %d", size, int64(MaxPutSize))
	}
	var hr *hashingReader
	if cs.Algorithm != "" {
		h := newChecksumHash(cs.Algorithm)
		if h == nil {
			return nil, errorf(ErrInvalidArgument, "unknown checksum algorithm %q", cs.Algorithm)
		}
		hr = &hashingReader{r: r, h: h}
		r = hr
	}
	if size >= 0 {
		// Never store more than declared; a short body fails in Split's read.
		r = io.LimitReader(r, size+1)
	}
	hint := size
	var plainMD5 hash.Hash
	var encrypter *sse.Encrypter
	if enc != nil {
		if wantMD5 != nil || enc.plainETag {
			plainMD5 = md5.New()
			r = &hashingReader{r: r, h: plainMD5}
		}
		var err error
		if encrypter, err = sse.NewEncrypter(r, enc.key, enc.part, enc.seg, size); err != nil {
			return nil, err
		}
		r = encrypter
		if size >= 0 {
			hint = sse.CipherSize(size, enc.seg)
		}
	}
	res, err := chunk.Split(ctx, l.ns.Blobs(), r, 0, chunk.SplitOptions{
		ChunkSize: l.ns.ChunkSize(), Concurrency: l.conc, SizeHint: hint, Now: l.now,
		NoMD5: enc != nil && enc.plainETag, // the ETag is the plaintext's MD5, taken above
		// SSE ciphertext is not sealed a second time: its keys are not on the
		// volume servers either (docs/security.md).
		Encrypt: enc == nil && l.ns.EncryptData(),
	})
	u := &upload{chunks: res.Chunks, size: res.Size, md5: res.MD5, plain: res.Size}
	fail := func(err error) (*upload, error) {
		l.discard(u.chunks)
		return nil, err
	}
	if encrypter != nil {
		u.plain = encrypter.Size()
		u.part = &enc.part
		u.part.Size = u.plain
		if plainMD5 != nil {
			sum := plainMD5.Sum(nil)
			if enc.plainETag {
				u.md5 = sum
			}
			if err == nil && wantMD5 != nil && string(wantMD5) != string(sum) {
				return fail(errorf(ErrBadDigest, "Content-MD5 does not match the content"))
			}
		}
		wantMD5 = nil // checked
	}
	if err != nil {
		return fail(err)
	}
	if size >= 0 && u.plain != size {
		return fail(errorf(ErrInvalidArgument, "body of %d bytes, Content-Length %d", u.plain, size))
	}
	if u.plain > MaxPutSize {
		return fail(errorf(ErrEntityTooLarge, "%d bytes exceeds %d", u.plain, int64(MaxPutSize)))
	}
	if wantMD5 != nil && string(wantMD5) != string(res.MD5) {
		return fail(errorf(ErrBadDigest, "Content-MD5 does not match the content"))
	}
	if hr != nil {
		got := b64(hr.h.Sum(nil))
		want := cs.Value
		if want == "" && cs.Trailer != nil {
			want = cs.Trailer()
		}
		if want != "" && want != got {
			return fail(errorf(ErrBadDigest, "x-amz-checksum-%s does not match the content", strings.ToLower(cs.Algorithm)))
		}
		u.checksum = Checksum{Algorithm: cs.Algorithm, Value: got, Type: ChecksumFullObject}
	}
	if !pack {
		return u, nil
	}
	packed, err := chunk.Pack(ctx, l.ns.Blobs(), u.chunks, 1000, 1000)
	if err != nil {
		return fail(err)
	}
	u.chunks = packed
	return u, nil
}

// discard deletes blobs written for an object that was not stored. It
// runs detached from the request, which may have been cancelled.
func (l *Layer) discard(cs []chunk.Chunk) {
	if len(cs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resolved, err := chunk.Resolve(ctx, l.ns.Blobs(), cs, 0, -1)
	if err == nil {
		cs = append(resolved, cs...)
	}
	for _, c := range cs {
		if err := l.ns.Blobs().Delete(ctx, c.FID); err != nil && !errors.Is(err, chunk.ErrNotFound) {
			l.log.Warn("objectapi: deleting an unused chunk", "fid", c.FID, "err", err)
		}
	}
}

// PutObject stores the content of r as bucket/key, replacing any object
// there. The content streams to the blob layer in chunks (hashing MD5 and
// the requested checksum on the way); the entry is created in one filer
// call at the end.
func (l *Layer) PutObject(ctx context.Context, bucket, key string, r io.Reader, opts PutOptions) (ObjectInfo, error) {
	p, dirKey, err := l.objectPath(bucket, key)
	if err != nil {
		return ObjectInfo{}, err
	}
	b, err := l.bucketEntry(ctx, bucket)
	if err != nil {
		return ObjectInfo{}, err
	}
	if err := validTags(opts.Tags, 10); err != nil {
		return ObjectInfo{}, err
	}
	if err := l.checkLockRequest(b, opts.Lock); err != nil {
		return ObjectInfo{}, err
	}
	wc := WriteConditions{IfMatch: opts.IfMatch, IfNoneMatch: opts.IfNoneMatch, IfUnmodifiedSince: opts.IfUnmodifiedSince}
	if err := l.precheck(ctx, p, bucket, key, wc); err != nil {
		return ObjectInfo{}, err
	}
	exclusive := strings.TrimSpace(opts.IfNoneMatch) == "*"
	var enc *encryptingPart
	if x := opts.Encryption; x != nil {
		enc = newEncryptingPart(x.Meta, x.Key, 1)
	}
	u, err := l.store(ctx, r, opts.Size, opts.ContentMD5, opts.Checksum, enc)
	if err != nil {
		return ObjectInfo{}, err
	}
	e := &filer.Entry{Path: p, Mode: 0o644, Size: u.size, MD5: u.md5, Chunks: u.chunks}
	applyMeta(e, opts.Metadata)
	if c := encodeChecksum(u.checksum); c != nil {
		e.Xattrs[xaChecksum] = c
	}
	if enc != nil {
		m := *opts.Encryption.Meta
		m.Parts = []sse.Part{*u.part}
		e.Xattrs[xaSSE] = m.Marshal()
	}
	vid := ""
	if dirKey {
		err = l.putDirObject(ctx, bucket, key, e, exclusive)
	} else {
		vid, err = l.commitObject(ctx, bucket, key, b, e, commitOptions{exclusive: exclusive, check: l.checker(bucket, key, wc)})
	}
	if err != nil {
		if !commitUncertain(err) { // the entry may be stored and refer to them
			l.discard(u.chunks)
		}
		if exclusive && errors.Is(err, filer.ErrExists) {
			return ObjectInfo{}, errorf(ErrPreconditionFailed, "If-None-Match: %q exists", key)
		}
		return ObjectInfo{}, nsErr(err, key)
	}
	if e.Mtime.IsZero() {
		e.Mtime = l.now()
	}
	oi := l.info(bucket, e)
	oi.VersionID = vid
	return oi, nil
}

// putDirObject marks the directory of key (ending in '/') as an object
// with e's content and attributes, creating it if needed; a file at its
// path (the object key without the '/') is moved apart (shadow.go).
func (l *Layer) putDirObject(ctx context.Context, bucket, key string, e *filer.Entry, exclusive bool) error {
	e.Mode = os.ModeDir | 0o755
	e.Xattrs[xaObject] = []byte("1")
	name := strings.TrimSuffix(key, "/")
	return l.ns.Atomically(ctx, func(tx filer.Batch) error {
		cur, err := tx.Find(e.Path)
		switch {
		case errors.Is(err, filer.ErrNotFound):
			if err := l.ensureParents(tx, bucket, name); err != nil {
				return err
			}
			return tx.Create(e, filer.CreateOptions{Exclusive: true})
		case err != nil:
			return err
		case !cur.IsDir():
			if err := l.shadow(tx, bucket, name, cur); err != nil {
				return err
			}
			if cur, err = tx.Find(e.Path); err != nil {
				return err
			}
		case exclusive && isDirObject(cur):
			return filer.ErrExists
		case isDirObject(cur):
			// Directory objects keep no versions: replacing one destroys it.
			if err := l.checkUnlocked(ctx, cur); err != nil {
				return err
			}
		}
		ne := e.Clone()
		ne.Crtime = cur.Crtime
		ne.Mtime = l.now()
		if hasShadow(cur) {
			ne.Xattrs[xaShadow] = []byte("1")
		}
		return tx.Update(ne)
	})
}

// GetOptions select what GetObject returns.
type GetOptions struct {
	Range      *Range
	PartNumber int // > 0: that part of a multipart object (or 1 of any object)
	Conditions Conditions
	NoBody     bool   // HEAD: check and describe only
	VersionID  string // "" the latest version
	Keys       Keys   // Keys.Object gives the data key of an encrypted object
}

// Object is an object being read.
type Object struct {
	Info ObjectInfo
	// Body streams Length bytes from Start; the caller closes it. Nil for
	// NoBody.
	Body          io.ReadCloser
	Start, Length int64
	Partial       bool // a range or part was asked for
}

// GetObject returns an object's description and, unless NoBody, a reader
// of the requested bytes. Conditions fail with ErrPreconditionFailed or
// ErrNotModified; a range beyond the end with ErrInvalidRange.
func (l *Layer) GetObject(ctx context.Context, bucket, key string, opts GetOptions) (*Object, error) {
	oi, e, err := l.readableVersion(ctx, bucket, key, opts.VersionID)
	if err != nil {
		return nil, err
	}
	if err := opts.Conditions.check(oi.ETag, oi.LastModified, false); err != nil {
		return nil, err
	}
	dek, err := dataKey(opts.Keys.Object, oi.SSE)
	if err != nil {
		return nil, err
	}
	o := &Object{Info: oi, Length: oi.Size}
	switch {
	case opts.PartNumber > 0:
		start, n, err := l.partRange(ctx, e, oi, opts.PartNumber)
		if err != nil {
			return nil, err
		}
		o.Start, o.Length, o.Partial = start, n, true
	case opts.Range != nil:
		start, n, err := opts.Range.resolve(oi.Size)
		if err != nil {
			return nil, err
		}
		o.Start, o.Length, o.Partial = start, n, true
	}
	if opts.NoBody {
		return o, nil
	}
	o.Body, err = l.openPlain(ctx, e, oi, func(*sse.Meta) ([]byte, error) { return dek, nil }, o.Start, o.Length, false)
	return o, err
}

// open returns a reader of n bytes of e's content from off.
func (l *Layer) open(ctx context.Context, e *filer.Entry, off, n int64) (io.ReadCloser, error) {
	cs, err := chunk.Resolve(ctx, l.ns.Blobs(), e.Chunks, off, n)
	if err != nil {
		return nil, err
	}
	rd := chunk.NewReader(ctx, l.ns.Blobs(), cs, e.Size)
	if off > 0 {
		if _, err := rd.Seek(off, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return readCloser{io.LimitReader(rd, n), rd}, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// partRange is the byte range of part n: the parts are recorded in the
// object's xattr s3.parts as their sizes.
func (l *Layer) partRange(ctx context.Context, e *filer.Entry, oi ObjectInfo, n int) (int64, int64, error) {
	sizes := oi.PartSizes
	if len(sizes) == 0 {
		if n == 1 {
			return 0, oi.Size, nil
		}
		return 0, 0, errorf(ErrInvalidPart, "the object has 1 part, not %d", n)
	}
	if n > len(sizes) {
		return 0, 0, errorf(ErrInvalidPart, "the object has %d parts, not %d", len(sizes), n)
	}
	var start int64
	for _, s := range sizes[:n-1] {
		start += s
	}
	return start, sizes[n-1], nil
}

// DeleteObject deletes the latest version of an object as
// DeleteObjectVersion does with no version id.
func (l *Layer) DeleteObject(ctx context.Context, bucket, key string) error {
	_, err := l.DeleteObjectVersion(ctx, bucket, key, "")
	return err
}

// removeObject removes the current object when check (nil: none) accepts
// it, in one transaction; a missing key is not an error (S3 answers 204
// either way). Directories left empty are removed too.
func (l *Layer) removeObject(ctx context.Context, bucket, key string, check func(*filer.Entry) error) error {
	p, dirKey, err := l.objectPath(bucket, key)
	if err != nil {
		return err
	}
	if dirKey {
		return l.removeDirObject(ctx, bucket, p, check)
	}
	var s slot
	err = l.ns.Atomically(ctx, func(tx filer.Batch) error {
		if s, err = l.locate(tx, bucket, key); err != nil {
			return err
		}
		if check != nil {
			if err := check(s.cur); err != nil {
				return err
			}
		}
		if s.cur == nil {
			return nil
		}
		if err := l.checkUnlocked(ctx, s.cur); err != nil {
			return err
		}
		return l.unplace(tx, s)
	})
	if err != nil || s.cur == nil {
		return err
	}
	if s.shadowed() {
		l.tidy(ctx, bucket, p)
	} else {
		l.tidyAbove(ctx, bucket, p)
	}
	return nil
}

// removeDirObject removes the directory object at p when check (nil:
// none) accepts it: the directory goes if nothing else needs it, else
// only its object attributes and content.
func (l *Layer) removeDirObject(ctx context.Context, bucket, p string, check func(*filer.Entry) error) error {
	found := false
	err := l.ns.Atomically(ctx, func(tx filer.Batch) error {
		e, err := tx.Find(p)
		if err != nil && !errors.Is(err, filer.ErrNotFound) && !errors.Is(err, filer.ErrNotDir) {
			return err
		}
		if check != nil {
			if err := check(e); err != nil {
				return err
			}
		}
		if found = err == nil && isDirObject(e); !found {
			return nil
		}
		if err := l.checkUnlocked(ctx, e); err != nil {
			return err
		}
		// Keep the directory (without the object) for what it holds; tidy
		// removes it if that is nothing.
		ne := &filer.Entry{Path: p, Mode: e.Mode, Crtime: e.Crtime, Mtime: e.Mtime}
		if hasShadow(e) {
			ne.Xattrs = map[string][]byte{xaShadow: []byte("1")}
		}
		return tx.Update(ne)
	})
	if err != nil || !found {
		return err
	}
	l.tidy(ctx, bucket, p)
	return nil
}

// DeleteResult is the outcome of deleting one key or version.
type DeleteResult struct {
	Key string
	// VersionID is the version deleted or the delete marker created; ""
	// when the bucket is unversioned.
	VersionID string
	// DeleteMarker reports that a delete marker was created or that the
	// version deleted was one.
	DeleteMarker bool
	Err          error
}

// ObjectToDelete names one object (and optionally a version) of
// DeleteObjects.
type ObjectToDelete struct {
	Key, VersionID string
	Conditions     WriteConditions // ETag, LastModifiedTime, Size
}

// DeleteObjects deletes objects or versions one after the other.
func (l *Layer) DeleteObjects(ctx context.Context, bucket string, objs []ObjectToDelete) ([]DeleteResult, error) {
	if _, err := l.bucketEntry(ctx, bucket); err != nil {
		return nil, err
	}
	out := make([]DeleteResult, len(objs))
	for i, o := range objs {
		r, err := l.DeleteObjectIf(ctx, bucket, o.Key, o.VersionID, o.Conditions)
		r.Key, r.Err = o.Key, err
		out[i] = r
	}
	return out, nil
}

func atoiOr(s string, def int) int {
	n := 0
	if s == "" {
		return def
	}
	for _, c := range s {
		if c < '0' || c > '9' || n > 1<<20 {
			return def
		}
		n = n*10 + int(c-'0')
	}
	return n
}

package objectapi

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/filer"
	"github.com/kelpfs/kelp/internal/sse"
)

// MaxParts is the highest part number.
const MaxParts = 10000

const xaParts = "s3.parts" // sizes of a multipart object's parts, comma-separated

// Upload is an unfinished multipart upload.
type Upload struct {
	Key, UploadID string
	Initiated     time.Time
	Initiator     string // canonical id of the identity that created it ("" unknown or anonymous)
}

// PartInfo describes an uploaded part.
type PartInfo struct {
	Number       int
	ETag         string
	Size         int64
	LastModified time.Time
	Checksum     Checksum
	SSE          *sse.Meta // the upload's encryption (UploadPart, UploadPartCopy), nil none
}

// CompletePart names a part in CompleteMultipartUpload.
type CompletePart struct {
	Number int
	ETag   string
}

// CompleteOptions tune CompleteMultipartUpload.
type CompleteOptions struct {
	IfNoneMatch       string // as in PutOptions
	IfMatch           string
	IfUnmodifiedSince time.Time
	// FullChecksum is a whole-object checksum sent with the completion
	// (x-amz-checksum-*), stored as given for a FULL_OBJECT upload.
	FullChecksum string
}

func (l *Layer) uploadDir(bucket, id string) string { return l.uploads + "/" + bucket + "/" + id }

func partName(n int) string { return fmt.Sprintf("%05d", n) }

// CreateMultipartUpload starts an upload of key with its future metadata;
// checksumAlg/checksumType ("" none) ask for part checksums.
func (l *Layer) CreateMultipartUpload(ctx context.Context, bucket, key string, md Metadata, checksumAlg, checksumType string) (string, error) {
	return l.CreateMultipartUploadAs(ctx, bucket, key, "", md, checksumAlg, checksumType)
}

// CreateMultipartUploadAs is CreateMultipartUpload that records initiator
// as the identity that created the upload (ListMultipartUploads and
// ListParts report it).
func (l *Layer) CreateMultipartUploadAs(ctx context.Context, bucket, key, initiator string, md Metadata, checksumAlg, checksumType string) (string, error) {
	if _, _, err := l.objectPath(bucket, key); err != nil {
		return "", err
	}
	bkt, err := l.bucketEntry(ctx, bucket)
	if err != nil {
		return "", err
	}
	if err := validTags(md.Tags, 10); err != nil {
		return "", err
	}
	if err := l.checkLockRequest(bkt, md.Lock); err != nil {
		return "", err
	}
	if checksumAlg != "" && newChecksumHash(checksumAlg) == nil {
		return "", errorf(ErrInvalidArgument, "unknown checksum algorithm %q", checksumAlg)
	}
	checksumType, err = MultipartChecksumType(checksumAlg, checksumType)
	if err != nil {
		return "", err
	}
	var b [16]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	e := &filer.Entry{Path: l.uploadDir(bucket, id), Mode: os.ModeDir | 0o755}
	applyMeta(e, md)
	e.Xattrs[xaKey] = []byte(key)
	if initiator != "" {
		e.Xattrs[xaInitiator] = []byte(initiator)
	}
	if checksumAlg != "" {
		e.Xattrs[xaChecksum] = encodeChecksum(Checksum{Algorithm: checksumAlg, Type: checksumType})
	}
	if md.Encryption != nil {
		e.Xattrs[xaSSE] = md.Encryption.Meta.Marshal()
	}
	if err := l.ns.CreateEntry(ctx, e, filer.CreateOptions{Exclusive: true}); err != nil {
		return "", err
	}
	return id, nil
}

// MultipartChecksumType checks and defaults an upload's checksum type: CRCs
// can be combined into a FULL_OBJECT checksum, digests only into a COMPOSITE
// one (a digest of the parts' digests); CRC64NVME is full-object only.
func MultipartChecksumType(alg, typ string) (string, error) {
	if alg == "" {
		if typ != "" {
			return "", errorf(ErrInvalidRequest, "x-amz-checksum-type needs x-amz-checksum-algorithm")
		}
		return "", nil
	}
	_, crc := combinable[alg]
	switch {
	case typ == "" && alg == ChecksumCRC64NVME:
		return ChecksumFullObject, nil
	case typ == "":
		return ChecksumComposite, nil
	case typ == ChecksumFullObject && !crc:
		return "", errorf(ErrInvalidRequest, "the FULL_OBJECT checksum type is not supported with %s", alg)
	case typ == ChecksumComposite && alg == ChecksumCRC64NVME:
		return "", errorf(ErrInvalidRequest, "the COMPOSITE checksum type is not supported with %s", alg)
	case typ != ChecksumFullObject && typ != ChecksumComposite:
		return "", errorf(ErrInvalidArgument, "unknown checksum type %q", typ)
	}
	return typ, nil
}

// findUpload returns the directory of upload id of bucket/key.
func (l *Layer) findUpload(ctx context.Context, bucket, key, id string) (*filer.Entry, error) {
	if !validUploadID(id) {
		return nil, errorf(ErrNoSuchUpload, "%q", id)
	}
	if err := bucketLookupName(bucket); err != nil {
		return nil, err
	}
	e, err := l.ns.FindEntry(ctx, l.uploadDir(bucket, id))
	if errors.Is(err, filer.ErrNotFound) || err == nil && string(e.Xattrs[xaKey]) != key {
		if _, berr := l.bucketEntry(ctx, bucket); berr != nil {
			return nil, berr
		}
		return nil, errorf(ErrNoSuchUpload, "%q", id)
	}
	return e, err
}

// PartOptions describe an uploaded part.
type PartOptions struct {
	Size       int64
	ContentMD5 []byte
	Checksum   ChecksumSpec
	Keys       Keys // Keys.Object gives the data key of an encrypted upload
}

// UploadPart stores part n of an upload; the content streams to the blob
// layer. A part uploaded again replaces the earlier one.
func (l *Layer) UploadPart(ctx context.Context, bucket, key, id string, n int, r io.Reader, opts PartOptions) (PartInfo, error) {
	if n < 1 || n > MaxParts {
		return PartInfo{}, errorf(ErrInvalidArgument, "part number %d is not between 1 and %d", n, MaxParts)
	}
	up, err := l.findUpload(ctx, bucket, key, id)
	if err != nil {
		return PartInfo{}, err
	}
	if opts.Checksum.Algorithm == "" {
		opts.Checksum.Algorithm = decodeChecksum(up.Xattrs[xaChecksum]).Algorithm
	}
	enc, err := l.partEncryption(up, n, opts.Keys.Object)
	if err != nil {
		return PartInfo{}, err
	}
	u, err := l.storeRaw(ctx, r, opts.Size, opts.ContentMD5, opts.Checksum, enc)
	if err != nil {
		return PartInfo{}, err
	}
	pi, err := l.commitPart(ctx, up, n, u)
	pi.SSE = sseMeta(up)
	return pi, err
}

// partEncryption is how part n of upload up is encrypted (nil: it is not).
func (l *Layer) partEncryption(up *filer.Entry, n int, f KeyFunc) (*encryptingPart, error) {
	m := sseMeta(up)
	dek, err := dataKey(f, m)
	if err != nil || m == nil {
		return nil, err
	}
	return newEncryptingPart(m, dek, n), nil
}

// storeRaw is store without packing chunks into manifests: part chunks
// are shifted into the object at completion, which a manifest's inner
// offsets would not follow.
func (l *Layer) storeRaw(ctx context.Context, r io.Reader, size int64, wantMD5 []byte, cs ChecksumSpec, enc *encryptingPart) (*upload, error) {
	return l.storeOpts(ctx, r, size, wantMD5, cs, false, enc)
}

func (l *Layer) commitPart(ctx context.Context, up *filer.Entry, n int, u *upload) (PartInfo, error) {
	p := up.Path + "/" + partName(n)
	e := &filer.Entry{Path: p, Mode: 0o644, Size: u.size, MD5: u.md5,
		Xattrs: map[string][]byte{xaChunks: chunk.AppendList(nil, u.chunks)}}
	if c := encodeChecksum(u.checksum); c != nil {
		e.Xattrs[xaChecksum] = c
	}
	if u.part != nil {
		e.Xattrs[xaSSEPart] = encodePart(*u.part)
	}
	// The part it replaces (a retry, or a concurrent upload of the same
	// number) is found in the transaction that replaces it, so that its
	// blobs, which no entry's chunk list holds, are collected exactly once.
	var old *filer.Entry
	err := l.ns.Atomically(ctx, func(tx filer.Batch) error {
		old = nil
		if cur, err := tx.Find(p); err == nil && !cur.IsDir() {
			old = cur
		}
		return tx.Create(e, filer.CreateOptions{NoParents: true})
	})
	if err != nil {
		if !commitUncertain(err) {
			l.discard(u.chunks)
		}
		if errors.Is(err, filer.ErrNotFound) {
			return PartInfo{}, errorf(ErrNoSuchUpload, "aborted while part %d was uploaded", n)
		}
		return PartInfo{}, err
	}
	if old != nil {
		l.discard(partChunks(old))
	}
	return PartInfo{Number: n, ETag: hex.EncodeToString(u.md5), Size: u.plain, LastModified: l.now(), Checksum: u.checksum}, nil
}

func partChunks(e *filer.Entry) []chunk.Chunk {
	cs, _, err := chunk.ReadList(e.Xattrs[xaChunks])
	if err != nil {
		return nil
	}
	return cs
}

// UploadPartCopy stores part n from a range (nil: all) of another object.
func (l *Layer) UploadPartCopy(ctx context.Context, bucket, key, id string, n int, srcBucket, srcKey, srcVersion string, rng *Range, cond Conditions, keys Keys) (PartInfo, error) {
	if n < 1 || n > MaxParts {
		return PartInfo{}, errorf(ErrInvalidArgument, "part number %d is not between 1 and %d", n, MaxParts)
	}
	up, err := l.findUpload(ctx, bucket, key, id)
	if err != nil {
		return PartInfo{}, err
	}
	si, src, err := l.readableVersion(ctx, srcBucket, srcKey, srcVersion)
	if err != nil {
		return PartInfo{}, copySourceErr(err)
	}
	if err := cond.check(si.ETag, si.LastModified, true); err != nil {
		return PartInfo{}, err
	}
	off, length := int64(0), si.Size
	if rng != nil {
		if rng.First < 0 || rng.Last < 0 || rng.Last >= si.Size {
			return PartInfo{}, errorf(ErrInvalidRange, "x-amz-copy-source-range must be bytes=first-last within the %d-byte source", si.Size)
		}
		off, length = rng.First, rng.Last-rng.First+1
	}
	enc, err := l.partEncryption(up, n, keys.Object)
	if err != nil {
		return PartInfo{}, err
	}
	body, err := l.openPlain(ctx, src, si, keys.Source, off, length, true)
	if err != nil {
		return PartInfo{}, err
	}
	defer body.Close()
	alg := decodeChecksum(up.Xattrs[xaChecksum]).Algorithm
	u, err := l.storeRaw(ctx, body, length, nil, ChecksumSpec{Algorithm: alg}, enc)
	if err != nil {
		return PartInfo{}, err
	}
	pi, err := l.commitPart(ctx, up, n, u)
	pi.SSE = sseMeta(up)
	return pi, err
}

// parts returns an upload's part entries by number.
func (l *Layer) parts(ctx context.Context, up *filer.Entry) (map[int]*filer.Entry, []int, error) {
	byNum := map[int]*filer.Entry{}
	var nums []int
	after := ""
	for {
		es, more, err := l.ns.ListEntries(ctx, up.Path, filer.ListOptions{StartAfter: after, Limit: pageSize})
		if errors.Is(err, filer.ErrNotFound) {
			// Completed or aborted since it was found (a concurrent
			// CompleteMultipartUpload looks for its recorded result).
			return nil, nil, errorf(ErrNoSuchUpload, "%q is gone", up.Name())
		}
		if err != nil {
			return nil, nil, err
		}
		for _, e := range es {
			after = e.Name()
			n, err := strconv.Atoi(e.Name())
			if err == nil && !e.IsDir() {
				byNum[n] = e
				nums = append(nums, n)
			}
		}
		if !more {
			sort.Ints(nums)
			return byNum, nums, nil
		}
	}
}

// CompleteMultipartUpload assembles the listed parts into the object. No
// data is copied: the object's entry references the parts' chunks. Parts
// uploaded but not listed are deleted. Completing an upload again with the
// same parts within CompletedUploadTTL returns the first result.
func (l *Layer) CompleteMultipartUpload(ctx context.Context, bucket, key, id string, list []CompletePart, opts CompleteOptions) (ObjectInfo, error) {
	for try := 0; ; try++ {
		oi, err := l.completeOnce(ctx, bucket, key, id, list, opts)
		if errors.Is(err, ErrNoSuchUpload) {
			if done, ok := l.completedBefore(ctx, bucket, key, id, list); ok {
				return done, nil
			}
		}
		if !errors.Is(err, errPartsChanged) || try == 2 {
			return oi, err
		}
	}
}

// errPartsChanged: a part was uploaded again while the completion read
// the parts; the completion starts over with the new one.
var errPartsChanged = errorf(ErrInvalidPart, "a part was replaced during the completion; try again")

func (l *Layer) completeOnce(ctx context.Context, bucket, key, id string, list []CompletePart, opts CompleteOptions) (ObjectInfo, error) {
	up, err := l.findUpload(ctx, bucket, key, id)
	if err != nil {
		return ObjectInfo{}, err
	}
	if len(list) == 0 {
		return ObjectInfo{}, errorf(ErrMalformedInput, "you must specify at least one part")
	}
	byNum, _, err := l.parts(ctx, up)
	if err != nil {
		return ObjectInfo{}, err
	}
	want := decodeChecksum(up.Xattrs[xaChecksum])
	encMeta := sseMeta(up)
	var (
		chunks  []chunk.Chunk
		size    int64
		md5s    = md5.New()
		sums    [][]byte
		sizes   []string
		lens    []int64
		used    = map[int]bool{}
		sumHash = newChecksumHash(want.Algorithm)
	)
	for i, p := range list {
		if i > 0 && p.Number <= list[i-1].Number {
			return ObjectInfo{}, errorf(ErrInvalidPartOrder, "part %d after part %d", p.Number, list[i-1].Number)
		}
	}
	for i, p := range list {
		e := byNum[p.Number]
		if e == nil || !etagMatches(p.ETag, hex.EncodeToString(e.MD5)) {
			return ObjectInfo{}, errorf(ErrInvalidPart, "part %d with ETag %s was not uploaded", p.Number, p.ETag)
		}
		plain := e.Size
		if encMeta != nil {
			pe, ok := partEncryption(e)
			if !ok {
				return ObjectInfo{}, errorf(ErrInvalidPart, "part %d was not stored encrypted", p.Number)
			}
			plain = pe.Size
			encMeta.Parts = append(encMeta.Parts, pe)
		}
		if i < len(list)-1 && plain < l.minPart {
			return ObjectInfo{}, errorf(ErrEntityTooSmall, "part %d has %d bytes, the minimum is %d", p.Number, plain, l.minPart)
		}
		for _, c := range partChunks(e) {
			c.Offset += size
			chunks = append(chunks, c)
		}
		if sumHash != nil {
			pc := decodeChecksum(e.Xattrs[xaChecksum])
			raw, err := base64.StdEncoding.DecodeString(pc.Value)
			if pc.Algorithm != want.Algorithm || err != nil {
				sumHash = nil // a part without the checksum: none for the object
			} else {
				sums = append(sums, raw)
			}
		}
		md5s.Write(e.MD5)
		size += e.Size
		sizes = append(sizes, strconv.FormatInt(plain, 10))
		lens = append(lens, plain)
		used[p.Number] = true
	}
	etag := hex.EncodeToString(md5s.Sum(nil)) + "-" + strconv.Itoa(len(list))
	p, dirKey, err := l.objectPath(bucket, key)
	if err != nil {
		return ObjectInfo{}, err
	}
	packed, err := chunk.Pack(ctx, l.ns.Blobs(), chunks, 1000, 1000)
	if err != nil {
		return ObjectInfo{}, err
	}
	e := &filer.Entry{Path: p, Mode: 0o644, Size: size, Chunks: packed, Mime: up.Mime, Meta: up.Meta,
		Xattrs: map[string][]byte{xaETag: []byte(etag), xaParts: []byte(strings.Join(sizes, ","))}}
	if t := up.Xattrs[xaTags]; len(t) > 0 {
		e.Xattrs[xaTags] = t
	}
	copyAccess(e, up)
	copyLock(up, e)
	if encMeta != nil {
		e.Xattrs[xaSSE] = encMeta.Marshal()
	}
	switch {
	case want.Type == ChecksumFullObject && sumHash != nil:
		full, err := combineCRCs(want.Algorithm, sums, lens)
		if err != nil {
			return ObjectInfo{}, errorf(ErrInvalidPart, "%v", err)
		}
		if opts.FullChecksum != "" && opts.FullChecksum != b64(full) {
			return ObjectInfo{}, errorf(ErrBadDigest, "x-amz-checksum-%s %s does not match the parts' %s",
				strings.ToLower(want.Algorithm), opts.FullChecksum, b64(full))
		}
		e.Xattrs[xaChecksum] = encodeChecksum(Checksum{Algorithm: want.Algorithm, Value: b64(full), Type: ChecksumFullObject})
	case want.Type == ChecksumFullObject && opts.FullChecksum != "":
		// Some part was sent with another algorithm: keep the client's word.
		e.Xattrs[xaChecksum] = encodeChecksum(Checksum{Algorithm: want.Algorithm, Value: opts.FullChecksum, Type: ChecksumFullObject})
	case sumHash != nil && want.Type == ChecksumComposite:
		for _, s := range sums {
			sumHash.Write(s)
		}
		v := b64(sumHash.Sum(nil)) + "-" + strconv.Itoa(len(list))
		e.Xattrs[xaChecksum] = encodeChecksum(Checksum{Algorithm: want.Algorithm, Value: v, Type: ChecksumComposite})
	}
	wc := WriteConditions{IfMatch: opts.IfMatch, IfNoneMatch: opts.IfNoneMatch, IfUnmodifiedSince: opts.IfUnmodifiedSince}
	if err := l.precheck(ctx, p, bucket, key, wc); err != nil {
		return ObjectInfo{}, err
	}
	exclusive := strings.TrimSpace(opts.IfNoneMatch) == "*"
	b, err := l.bucketEntry(ctx, bucket)
	if err != nil {
		return ObjectInfo{}, err
	}
	vid := ""
	var unused []*filer.Entry // the parts left out, as the commit saw them
	if dirKey {
		err = l.putDirObject(ctx, bucket, key, e, exclusive)
		for n, pe := range byNum {
			if !used[n] {
				unused = append(unused, pe)
			}
		}
	} else {
		vid, err = l.commitObject(ctx, bucket, key, b, e, commitOptions{exclusive: exclusive, check: l.checker(bucket, key, wc),
			also: func(tx filer.Batch) error {
				// The upload goes with its completion: a second completion
				// of it (a retry, or a race) finds nothing to commit.
				if _, err := tx.Find(up.Path); errors.Is(err, filer.ErrNotFound) {
					return errorf(ErrNoSuchUpload, "upload %q was completed or aborted", id)
				}
				var err error
				if unused, err = l.partsUnchanged(tx, up.Path, byNum, used); err != nil {
					return err
				}
				if err := tx.Create(l.completedRecord(bucket, key, id, list, e, recordedVID(e, b)), filer.CreateOptions{}); err != nil {
					return err
				}
				return tx.Delete(up.Path, true)
			}})
	}
	if err != nil {
		if len(packed) != len(chunks) && !commitUncertain(err) {
			l.discard(manifestChunks(packed))
		}
		if exclusive && errors.Is(err, filer.ErrExists) {
			return ObjectInfo{}, errorf(ErrPreconditionFailed, "If-None-Match: %q exists", key)
		}
		return ObjectInfo{}, nsErr(err, key)
	}
	for _, pe := range unused {
		l.discard(partChunks(pe))
	}
	if dirKey {
		if err := l.ns.DeleteEntry(ctx, up.Path, true); err != nil {
			l.log.Warn("objectapi: removing a completed upload", "upload", id, "err", err)
		}
		if err := l.ns.CreateEntry(ctx, l.completedRecord(bucket, key, id, list, e, ""), filer.CreateOptions{}); err != nil {
			l.log.Warn("objectapi: recording a completed upload", "upload", id, "err", err)
		}
	}
	e.Mtime = l.now()
	oi := l.info(bucket, e)
	oi.VersionID = vid
	return oi, nil
}

// commitUncertain reports whether a failed commit may have been applied all
// the same: the store failed (a connection broken during COMMIT) or the
// context ended while committing. The blobs the entry refers to must then
// stay; at worst they are garbage nobody collects, which beats an object
// whose data is gone. A refusal of this package's own checks in the
// transaction (which the filer reports as ErrStore too) is certain: the
// transaction was rolled back.
func commitUncertain(err error) bool {
	if refusedInTransaction(err) {
		return false
	}
	return errors.Is(err, filer.ErrStore) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func manifestChunks(cs []chunk.Chunk) []chunk.Chunk {
	var out []chunk.Chunk
	for _, c := range cs {
		if c.Manifest {
			out = append(out, chunk.Chunk{FID: c.FID}) // the blob only: its chunks are the parts'
		}
	}
	return out
}

// AbortMultipartUpload deletes an upload and its parts' data.
func (l *Layer) AbortMultipartUpload(ctx context.Context, bucket, key, id string) error {
	up, err := l.findUpload(ctx, bucket, key, id)
	if err != nil {
		return err
	}
	return l.abort(ctx, up)
}

func (l *Layer) abort(ctx context.Context, up *filer.Entry) error {
	byNum, _, err := l.parts(ctx, up)
	if err != nil {
		return err
	}
	if err := l.ns.DeleteEntry(ctx, up.Path, true); err != nil && !errors.Is(err, filer.ErrNotFound) {
		return err
	}
	for _, e := range byNum {
		l.discard(partChunks(e))
	}
	return nil
}

// abortAll aborts every upload of a bucket (before the bucket goes).
func (l *Layer) abortAll(ctx context.Context, bucket string) error {
	dir := l.uploads + "/" + bucket
	for {
		es, _, err := l.ns.ListEntries(ctx, dir, filer.ListOptions{Limit: pageSize})
		if errors.Is(err, filer.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(es) == 0 {
			return l.ns.DeleteEntry(ctx, dir, false)
		}
		for _, e := range es {
			if err := l.abort(ctx, e); err != nil {
				return err
			}
		}
	}
}

// ListPartsResult is a page of an upload's parts.
type ListPartsResult struct {
	Parts          []PartInfo
	IsTruncated    bool
	NextPartMarker int
	Checksum       Checksum // the upload's algorithm and type, Value empty
	Initiated      time.Time
	Initiator      string // canonical id of the identity that created the upload ("" unknown)
}

// ListParts returns the parts numbered above marker, at most max.
func (l *Layer) ListParts(ctx context.Context, bucket, key, id string, marker, max int) (ListPartsResult, error) {
	up, err := l.findUpload(ctx, bucket, key, id)
	if err != nil {
		return ListPartsResult{}, err
	}
	byNum, nums, err := l.parts(ctx, up)
	if err != nil {
		return ListPartsResult{}, err
	}
	res := ListPartsResult{Checksum: decodeChecksum(up.Xattrs[xaChecksum]), Initiated: up.Crtime, Initiator: initiatorOf(up)}
	for _, n := range nums {
		if n <= marker {
			continue
		}
		if len(res.Parts) == max {
			res.IsTruncated = true
			break
		}
		e := byNum[n]
		size := e.Size
		if pe, ok := partEncryption(e); ok {
			size = pe.Size
		}
		res.Parts = append(res.Parts, PartInfo{Number: n, ETag: hex.EncodeToString(e.MD5), Size: size,
			LastModified: e.Mtime, Checksum: decodeChecksum(e.Xattrs[xaChecksum])})
		res.NextPartMarker = n
	}
	return res, nil
}

// ListUploadsOptions select a page of ListMultipartUploads.
type ListUploadsOptions struct {
	Prefix, Delimiter         string
	KeyMarker, UploadIDMarker string
	MaxUploads                int
}

// ListUploadsResult is a page of unfinished uploads, by key then time.
type ListUploadsResult struct {
	Uploads                           []Upload
	CommonPrefixes                    []string
	IsTruncated                       bool
	NextKeyMarker, NextUploadIDMarker string
}

// ListMultipartUploads lists a bucket's unfinished uploads. It reads all
// of them: a bucket is not expected to hold very many at once.
func (l *Layer) ListMultipartUploads(ctx context.Context, bucket string, opts ListUploadsOptions) (ListUploadsResult, error) {
	if _, err := l.bucketEntry(ctx, bucket); err != nil {
		return ListUploadsResult{}, err
	}
	var all []Upload
	after := ""
	for {
		es, more, err := l.ns.ListEntries(ctx, l.uploads+"/"+bucket, filer.ListOptions{StartAfter: after, Limit: pageSize})
		if errors.Is(err, filer.ErrNotFound) {
			break
		}
		if err != nil {
			return ListUploadsResult{}, err
		}
		for _, e := range es {
			after = e.Name()
			if k := string(e.Xattrs[xaKey]); strings.HasPrefix(k, opts.Prefix) {
				all = append(all, Upload{Key: k, UploadID: e.Name(), Initiated: e.Crtime, Initiator: initiatorOf(e)})
			}
		}
		if !more {
			break
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Key != all[j].Key {
			return all[i].Key < all[j].Key
		}
		if !all[i].Initiated.Equal(all[j].Initiated) {
			return all[i].Initiated.Before(all[j].Initiated)
		}
		return all[i].UploadID < all[j].UploadID
	})
	var res ListUploadsResult
	n, lastCP := 0, ""
	for i, u := range all {
		if opts.KeyMarker != "" {
			if u.Key < opts.KeyMarker || u.Key == opts.KeyMarker && (opts.UploadIDMarker == "" || !uploadAfter(all, i, opts.UploadIDMarker)) {
				continue
			}
		}
		cp := ""
		if opts.Delimiter != "" {
			if j := strings.Index(u.Key[len(opts.Prefix):], opts.Delimiter); j >= 0 {
				cp = u.Key[:len(opts.Prefix)+j+len(opts.Delimiter)]
			}
		}
		if cp != "" && cp == lastCP {
			continue
		}
		if n == opts.MaxUploads {
			res.IsTruncated = true
			break
		}
		n++
		if cp != "" {
			lastCP = cp
			res.CommonPrefixes = append(res.CommonPrefixes, cp)
			res.NextKeyMarker, res.NextUploadIDMarker = cp, ""
			continue
		}
		res.Uploads = append(res.Uploads, u)
		res.NextKeyMarker, res.NextUploadIDMarker = u.Key, u.UploadID
	}
	return res, nil
}

// uploadAfter reports whether all[i] comes after the upload with id marker
// among the uploads of the same key.
func uploadAfter(all []Upload, i int, marker string) bool {
	for j := i - 1; j >= 0 && all[j].Key == all[i].Key; j-- {
		if all[j].UploadID == marker {
			return true
		}
	}
	return false
}

// partSizes reads the part sizes of a multipart object.
func partSizes(e *filer.Entry) []int64 {
	v := string(e.Xattrs[xaParts])
	if v == "" {
		return nil
	}
	var out []int64
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil
		}
		out = append(out, n)
	}
	return out
}

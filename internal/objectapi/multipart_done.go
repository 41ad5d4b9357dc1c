package objectapi

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/kelpfs/kelp/internal/filer"
)

// CompletedUploadTTL is how long a completed upload is remembered, so that
// completing it again with the same parts (a client that retries because
// the first answer was lost) gets the first completion's result, as in S3,
// rather than NoSuchUpload.
const CompletedUploadTTL = 24 * time.Hour

const (
	xaPartList  = "s3.partlist"  // on a completed upload's record: "N:ETAG,..." as completed
	xaInitiator = "s3.initiator" // on an upload: the identity that created it
)

// completedDir holds a bucket's records of completed uploads: Root +
// "/.completed/<bucket>/<upload id>", empty files whose attributes are the
// completion's result. Bucket names cannot start with '.'.
func (l *Layer) completedDir(bucket string) string { return l.root + "/.completed/" + bucket }

// validUploadID accepts what can be an upload's name in the namespace.
func validUploadID(id string) bool {
	return id != "" && !strings.ContainsAny(id, "/\x00") && len(id) <= 64 && id[0] != '.'
}

// partListKey is the canonical form of a completion's part list.
func partListKey(list []CompletePart) string {
	var b strings.Builder
	for i, p := range list {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(p.Number))
		b.WriteByte(':')
		b.WriteString(strings.Trim(strings.TrimPrefix(strings.TrimSpace(p.ETag), "W/"), `"`))
	}
	return b.String()
}

// completedRecord is the record of upload id of key completed with list
// into e (whose version id is vid).
func (l *Layer) completedRecord(bucket, key, id string, list []CompletePart, e *filer.Entry, vid string) *filer.Entry {
	now := l.now()
	r := &filer.Entry{Path: l.completedDir(bucket) + "/" + id, Mode: 0o644, Crtime: now, Mtime: now, Xattrs: map[string][]byte{
		xaKey: []byte(key), xaPartList: []byte(partListKey(list)), xaETag: e.Xattrs[xaETag], xaVID: []byte(vid),
	}}
	if c := e.Xattrs[xaChecksum]; len(c) > 0 {
		r.Xattrs[xaChecksum] = c
	}
	return r
}

// completedBefore returns the result of an earlier completion of upload id
// of key with the same parts, if it is remembered.
func (l *Layer) completedBefore(ctx context.Context, bucket, key, id string, list []CompletePart) (ObjectInfo, bool) {
	if !validUploadID(id) {
		return ObjectInfo{}, false
	}
	r, err := l.ns.FindEntry(ctx, l.completedDir(bucket)+"/"+id)
	if err != nil || string(r.Xattrs[xaKey]) != key || string(r.Xattrs[xaPartList]) != partListKey(list) ||
		l.now().Sub(r.Mtime) > CompletedUploadTTL {
		return ObjectInfo{}, false
	}
	oi := ObjectInfo{Bucket: bucket, Key: key, ETag: string(r.Xattrs[xaETag]), LastModified: r.Mtime,
		VersionID: string(r.Xattrs[xaVID]), Checksum: decodeChecksum(r.Xattrs[xaChecksum])}
	if i := strings.LastIndexByte(oi.ETag, '-'); i > 0 {
		oi.Parts = atoiOr(oi.ETag[i+1:], 0)
	}
	return oi, true
}

// pruneCompleted forgets the completed uploads older than
// CompletedUploadTTL (run with the lifecycle rules).
func (l *Layer) pruneCompleted(ctx context.Context, now time.Time) error {
	buckets, _, err := l.ns.ListEntries(ctx, l.root+"/.completed", filer.ListOptions{Limit: 100000})
	if errors.Is(err, filer.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, b := range buckets {
		after := ""
		for {
			es, more, err := l.ns.ListEntries(ctx, b.Path, filer.ListOptions{StartAfter: after, Limit: pageSize})
			if err != nil {
				return err
			}
			for _, e := range es {
				after = e.Name()
				if now.Sub(e.Mtime) > CompletedUploadTTL {
					if err := l.ns.DeleteEntry(ctx, e.Path, false); err != nil && !errors.Is(err, filer.ErrNotFound) {
						return err
					}
				}
			}
			if !more {
				break
			}
		}
		// Gone when empty; ErrNotEmpty keeps it for the records left.
		if err := l.ns.DeleteEntry(ctx, b.Path, false); err != nil && !errors.Is(err, filer.ErrNotEmpty) && !errors.Is(err, filer.ErrNotFound) {
			return err
		}
	}
	return nil
}

// Initiator returns the identity recorded as an upload's creator.
func initiatorOf(up *filer.Entry) string { return string(up.Xattrs[xaInitiator]) }

// recordedVID is the version id a completion into e answers in bucket b.
func recordedVID(e, b *filer.Entry) string {
	if v := e.Xattrs[xaVID]; len(v) > 0 {
		return string(v)
	}
	if versioningOf(b) == VersioningSuspended {
		return NullVersion
	}
	return ""
}

// partsUnchanged checks in tx that the parts a completion uses are still
// those it read (errPartsChanged otherwise: a part uploaded again in
// between would lose its blobs with the upload directory, or have the
// object's blobs collected) and returns the parts it leaves out, as tx
// sees them, for their blobs to be collected after the commit.
func (l *Layer) partsUnchanged(tx filer.Batch, dir string, read map[int]*filer.Entry, used map[int]bool) ([]*filer.Entry, error) {
	var unused []*filer.Entry
	seen := 0
	after := ""
	for {
		es, more, err := tx.List(dir, filer.ListOptions{StartAfter: after, Limit: pageSize})
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			after = e.Name()
			n, err := strconv.Atoi(e.Name())
			if err != nil || e.IsDir() {
				continue
			}
			if !used[n] {
				unused = append(unused, e)
				continue
			}
			seen++
			if string(e.Xattrs[xaChunks]) != string(read[n].Xattrs[xaChunks]) {
				return nil, errPartsChanged
			}
		}
		if !more {
			break
		}
	}
	if seen != len(used) {
		return nil, errPartsChanged
	}
	return unused, nil
}

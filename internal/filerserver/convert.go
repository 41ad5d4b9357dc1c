package filerserver

import (
	"os"
	"time"

	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/filer"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

func nsOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func timeOf(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

func toPB(e *filer.Entry) *filerpb.Entry {
	if e == nil {
		return nil
	}
	p := &filerpb.Entry{
		Path: e.Path, Mode: uint32(e.Mode), Uid: e.UID, Gid: e.GID,
		MtimeNs: nsOf(e.Mtime), CtimeNs: nsOf(e.Ctime), CrtimeNs: nsOf(e.Crtime),
		Mime: e.Mime, Size: e.Size, Md5: e.MD5, SymlinkTarget: e.Target,
		UserMetadata: e.Meta, Xattrs: e.Xattrs, IsDir: e.IsDir(),
	}
	if !e.IsDir() {
		p.Etag = e.ETag()
	}
	for _, c := range e.Chunks {
		p.Chunks = append(p.Chunks, &filerpb.Chunk{Fid: c.FID, Offset: c.Offset, Size: c.Size, MtimeNs: c.Mtime, Etag: c.ETag, Manifest: c.Manifest, CipherKey: c.CipherKey})
	}
	return p
}

func fromPB(p *filerpb.Entry) *filer.Entry {
	if p == nil {
		return &filer.Entry{}
	}
	mode := os.FileMode(p.Mode)
	if p.IsDir {
		mode |= os.ModeDir
	}
	e := &filer.Entry{
		Path: p.Path, Mode: mode, UID: p.Uid, GID: p.Gid,
		Mtime: timeOf(p.MtimeNs), Ctime: timeOf(p.CtimeNs), Crtime: timeOf(p.CrtimeNs),
		Mime: p.Mime, Size: p.Size, MD5: p.Md5, Target: p.SymlinkTarget,
		Meta: p.UserMetadata, Xattrs: p.Xattrs,
	}
	for _, c := range p.Chunks {
		e.Chunks = append(e.Chunks, chunk.Chunk{FID: c.Fid, Offset: c.Offset, Size: c.Size, Mtime: c.MtimeNs, ETag: c.Etag, Manifest: c.Manifest, CipherKey: chunk.KeyOf(c.CipherKey)})
	}
	if e.Size == 0 && !e.IsDir() {
		e.Size = chunk.TotalSize(e.Chunks)
	}
	return e
}

func eventToPB(ev *filer.Event) *filerpb.MetadataEvent {
	return &filerpb.MetadataEvent{
		Seq: ev.Seq, Type: filerpb.MetadataEvent_Type(ev.Type), TimeNs: nsOf(ev.Time),
		OldEntry: toPB(ev.Old), NewEntry: toPB(ev.New),
	}
}

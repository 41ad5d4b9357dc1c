package filersync

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/chunk"
	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// SystemDir is the filer directory the sync and backup tools keep their own
// state in (the cluster id, stored positions). It is never synced or backed up.
const SystemDir = "/.kelp"

// clusterIDPath holds the cluster id in its XattrClusterID attribute.
const clusterIDPath = SystemDir + "/cluster-id"

const (
	// XattrClusterID is the attribute of /.kelp/cluster-id holding the id.
	XattrClusterID = "kelp.cluster.id"
	// XattrOrigin marks an entry written by filer.sync: "<origin cluster
	// id> <mtime ns> <size>" of the source version it is a copy of.
	XattrOrigin = "kelp.sync.origin"
	// xattrSeq holds a stored position (decimal event sequence number).
	xattrSeq = "kelp.sync.seq"
)

// IsSystemPath reports whether p is the tools' own state directory or inside it.
func IsSystemPath(p string) bool {
	return p == SystemDir || strings.HasPrefix(p, SystemDir+"/")
}

// Site is one filer (and its cluster) as seen by the sync and backup tools:
// metadata through the filer's gRPC API, file data straight from and to the
// cluster's volume servers (masters from GetConfiguration), as `kelp mount`
// does.
type Site struct {
	Name string // for logs: "a", "b", "filer"
	Addr string // the filer's gRPC address
	ID   string // the cluster id (stable, stored in the namespace)

	cc   *grpc.ClientConn
	fc   filerpb.FilerClient
	cl   *client.Client
	conf *filerpb.GetConfigurationResponse
	req  client.AssignRequest
	log  *slog.Logger
}

// OpenSite connects to the filer at grpcAddr, waiting up to timeout for it
// to answer, and reads (or creates) its cluster id.
func OpenSite(ctx context.Context, name, grpcAddr string, timeout time.Duration, httpClient *http.Client, log *slog.Logger) (*Site, error) {
	return OpenSiteAuth(ctx, name, grpcAddr, "", timeout, httpClient, log)
}

// OpenSiteAuth is OpenSite showing the filer and its masters an access
// token ("" none; docs/security.md).
func OpenSiteAuth(ctx context.Context, name, grpcAddr, token string, timeout time.Duration, httpClient *http.Client, log *slog.Logger) (*Site, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := pb.DialOptions()
	if token != "" {
		opts = append(opts, auth.DialOption(auth.Static(token)))
	}
	cc, err := grpc.NewClient(grpcAddr, opts...)
	if err != nil {
		return nil, fmt.Errorf("filer %s: %w", grpcAddr, err)
	}
	s := &Site{Name: name, Addr: grpcAddr, cc: cc, fc: filerpb.NewFilerClient(cc), log: log}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s.conf, err = s.fc.GetConfiguration(cctx, &filerpb.GetConfigurationRequest{}, grpc.WaitForReady(true))
	if err != nil {
		cc.Close()
		return nil, fmt.Errorf("filer %s did not answer: %w", grpcAddr, err)
	}
	s.cl, err = client.New(client.Config{Masters: s.conf.Masters, HTTPClient: httpClient, Logger: log, AssignBatch: 64,
		AccessToken: auth.Static(token)})
	if err != nil {
		cc.Close()
		return nil, fmt.Errorf("filer %s: %w", grpcAddr, err)
	}
	s.req = client.AssignRequest{Collection: s.conf.Collection, Replication: s.conf.Replication}
	if s.ID, err = s.clusterID(ctx); err != nil {
		cc.Close()
		return nil, err
	}
	return s, nil
}

// Close drops the connection.
func (s *Site) Close() error { return s.cc.Close() }

// Filer is the gRPC client of the site's filer.
func (s *Site) Filer() filerpb.FilerClient { return s.fc }

// clusterID reads /.kelp/cluster-id, creating it (exclusively, so two tools
// starting at once agree) with a random id when missing.
func (s *Site) clusterID(ctx context.Context) (string, error) {
	for range 3 {
		e, err := s.Lookup(ctx, clusterIDPath)
		if err != nil {
			return "", err
		}
		if e != nil {
			if id := string(e.Xattrs[XattrClusterID]); id != "" {
				return id, nil
			}
			return "", fmt.Errorf("filer %s: %s has no %s attribute", s.Addr, clusterIDPath, XattrClusterID)
		}
		var b [8]byte
		rand.Read(b[:])
		_, err = s.fc.CreateEntry(ctx, &filerpb.CreateEntryRequest{Exclusive: true, Entry: &filerpb.Entry{
			Path: clusterIDPath, Mode: 0o644, Xattrs: map[string][]byte{XattrClusterID: []byte(hex.EncodeToString(b[:]))}}})
		if err != nil && status.Code(err) != codes.AlreadyExists {
			return "", fmt.Errorf("filer %s: create cluster id: %w", s.Addr, err)
		}
	}
	return "", fmt.Errorf("filer %s: cannot settle the cluster id", s.Addr)
}

// LastSeq is the sequence number of the filer's newest event.
func (s *Site) LastSeq(ctx context.Context) (uint64, error) {
	c, err := s.fc.GetConfiguration(ctx, &filerpb.GetConfigurationRequest{})
	if err != nil {
		return 0, err
	}
	return c.LastSeq, nil
}

// Lookup returns the entry at p, or nil when there is none.
func (s *Site) Lookup(ctx context.Context, p string) (*filerpb.Entry, error) {
	r, err := s.fc.LookupEntry(ctx, &filerpb.LookupEntryRequest{Path: p})
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lookup %s on %s: %w", p, s.Name, err)
	}
	return r.Entry, nil
}

// List calls fn for every entry of directory dir, in name order.
func (s *Site) List(ctx context.Context, dir string, fn func(*filerpb.Entry) error) error {
	after := ""
	for {
		st, err := s.fc.ListEntries(ctx, &filerpb.ListEntriesRequest{Dir: dir, StartAfter: after, Limit: 1000})
		if err != nil {
			return fmt.Errorf("list %s on %s: %w", dir, s.Name, err)
		}
		n := 0
		for {
			r, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if status.Code(err) == codes.NotFound {
				return nil
			}
			if err != nil {
				return fmt.Errorf("list %s on %s: %w", dir, s.Name, err)
			}
			n++
			after = path.Base(r.Entry.Path)
			if err := fn(r.Entry); err != nil {
				return err
			}
		}
		if n < 1000 {
			return nil
		}
	}
}

// ListPage returns up to limit entries of directory dir whose names sort
// after the name after ("" from the first), in name order. A directory that
// does not exist, or is not a directory, has no entries.
func (s *Site) ListPage(ctx context.Context, dir, after string, limit int) ([]*filerpb.Entry, error) {
	st, err := s.fc.ListEntries(ctx, &filerpb.ListEntriesRequest{Dir: dir, StartAfter: after, Limit: uint32(limit)})
	if err != nil {
		return nil, fmt.Errorf("list %s on %s: %w", dir, s.Name, err)
	}
	var out []*filerpb.Entry
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if c := status.Code(err); c == codes.NotFound || c == codes.FailedPrecondition {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list %s on %s: %w", dir, s.Name, err)
		}
		out = append(out, r.Entry)
	}
}

// Walk calls fn for every entry under root (root itself excluded), parents
// before children, skipping the system directory.
func (s *Site) Walk(ctx context.Context, root string, fn func(*filerpb.Entry) error) error {
	var dirs []string
	err := s.List(ctx, root, func(e *filerpb.Entry) error {
		if IsSystemPath(e.Path) {
			return nil
		}
		if err := fn(e); err != nil {
			return err
		}
		if e.IsDir {
			dirs = append(dirs, e.Path)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if err := s.Walk(ctx, d, fn); err != nil {
			return err
		}
	}
	return nil
}

// Open reads a file's content from the volume servers.
func (s *Site) Open(ctx context.Context, e *filerpb.Entry) (io.ReadCloser, error) {
	cs := fromPBChunks(e.Chunks)
	cs, err := chunk.Resolve(ctx, blobs{s}, cs, 0, -1)
	if err != nil {
		return nil, err
	}
	return chunk.NewReader(ctx, blobs{s}, cs, e.Size), nil
}

// Write stores r as the file e.Path with e's attributes (chunks, size and
// MD5 are computed), in one CreateEntry: one event on the site.
func (s *Site) Write(ctx context.Context, e *filerpb.Entry, r io.Reader) (*filerpb.Entry, error) {
	return s.write(ctx, e, r, false)
}

// WriteNew is Write for a path that must not exist yet: when it does,
// ALREADY_EXISTS, and the data uploaded is removed again. A copy whose
// answer was lost cannot then land twice.
func (s *Site) WriteNew(ctx context.Context, e *filerpb.Entry, r io.Reader) (*filerpb.Entry, error) {
	return s.write(ctx, e, r, true)
}

func (s *Site) write(ctx context.Context, e *filerpb.Entry, r io.Reader, exclusive bool) (*filerpb.Entry, error) {
	res, err := chunk.Split(ctx, blobs{s}, r, 0, chunk.SplitOptions{ChunkSize: int(s.conf.ChunkSize), SizeHint: e.Size, Encrypt: s.conf.EncryptData})
	if err == nil {
		res.Chunks, err = chunk.Pack(ctx, blobs{s}, res.Chunks, 1000, 1000)
	}
	if err != nil {
		s.discard(res.Chunks)
		return nil, err
	}
	ne := cloneAttrs(e)
	ne.Size, ne.Md5, ne.Chunks = res.Size, res.MD5, toPBChunks(res.Chunks)
	if _, err := s.fc.CreateEntry(ctx, &filerpb.CreateEntryRequest{Entry: ne, Exclusive: exclusive}); err != nil {
		if refused(err) {
			s.discard(res.Chunks)
		}
		return nil, fmt.Errorf("create %s on %s: %w", ne.Path, s.Name, err)
	}
	return ne, nil
}

// refused reports whether err, from a filer call that stores an entry,
// proves the entry was not stored. After any other error (the call
// cancelled, the connection lost, the store failing) the entry may be
// stored and refer to the new chunks, which must then stay: deleting them
// left a copy whose content was gone, and which a later sync skipped as
// already equal (seen when filer.sync was stopped during a copy).
func refused(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.AlreadyExists, codes.FailedPrecondition, codes.NotFound,
		codes.PermissionDenied, codes.Unauthenticated, codes.ResourceExhausted, codes.OutOfRange:
		return true
	}
	return false
}

// CreateMeta stores e as it is: an entry that has no content (directory,
// symlink, empty file).
func (s *Site) CreateMeta(ctx context.Context, e *filerpb.Entry) error {
	return s.createMeta(ctx, e, false)
}

func (s *Site) createMeta(ctx context.Context, e *filerpb.Entry, exclusive bool) error {
	if _, err := s.fc.CreateEntry(ctx, &filerpb.CreateEntryRequest{Entry: e, Exclusive: exclusive}); err != nil {
		return fmt.Errorf("create %s on %s: %w", e.Path, s.Name, err)
	}
	return nil
}

// SetAttributes gives p (e.Path) e's attributes, keeping its data, unless
// its ctime is no longer ifCtimeNs (then an error: it changed since read).
func (s *Site) SetAttributes(ctx context.Context, e *filerpb.Entry, ifCtimeNs int64) error {
	_, err := s.fc.UpdateEntry(ctx, &filerpb.UpdateEntryRequest{Entry: e, AttributesOnly: true, IfCtimeNs: ifCtimeNs})
	if err != nil {
		return fmt.Errorf("set attributes of %s on %s: %w", e.Path, s.Name, err)
	}
	return nil
}

// Delete removes p (recursively); a missing entry is fine.
func (s *Site) Delete(ctx context.Context, p string) error {
	_, err := s.fc.DeleteEntry(ctx, &filerpb.DeleteEntryRequest{Path: p, Recursive: true})
	if err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("delete %s on %s: %w", p, s.Name, err)
	}
	return nil
}

// DeleteIfEmpty removes directory p when it has no entries; a missing or
// non-empty directory is left as it is, without an error.
func (s *Site) DeleteIfEmpty(ctx context.Context, p string) error {
	_, err := s.fc.DeleteEntry(ctx, &filerpb.DeleteEntryRequest{Path: p})
	if c := status.Code(err); err != nil && c != codes.NotFound && c != codes.FailedPrecondition {
		return fmt.Errorf("delete %s on %s: %w", p, s.Name, err)
	}
	return nil
}

// Rename moves from to to.
func (s *Site) Rename(ctx context.Context, from, to string) error {
	if _, err := s.fc.Rename(ctx, &filerpb.RenameRequest{From: from, To: to}); err != nil {
		return fmt.Errorf("rename %s to %s on %s: %w", from, to, s.Name, err)
	}
	return nil
}

// LoadPosition reads the position stored under name in the system
// directory; ok is false when none is stored.
func (s *Site) LoadPosition(ctx context.Context, name string) (seq uint64, ok bool, err error) {
	e, err := s.Lookup(ctx, SystemDir+"/sync/"+name)
	if err != nil || e == nil {
		return 0, false, err
	}
	seq, err = strconv.ParseUint(string(e.Xattrs[xattrSeq]), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("position %s on %s: %w", name, s.Name, err)
	}
	return seq, true, nil
}

// SavePosition stores seq under name in the system directory.
func (s *Site) SavePosition(ctx context.Context, name string, seq uint64) error {
	_, err := s.fc.CreateEntry(ctx, &filerpb.CreateEntryRequest{Entry: &filerpb.Entry{
		Path: SystemDir + "/sync/" + name, Mode: 0o644,
		Xattrs: map[string][]byte{xattrSeq: []byte(strconv.FormatUint(seq, 10))}}})
	if err != nil {
		return fmt.Errorf("save position %s on %s: %w", name, s.Name, err)
	}
	return nil
}

func (s *Site) discard(cs []chunk.Chunk) {
	for _, c := range cs {
		if id, err := fid.Parse(c.FID); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = s.cl.Delete(ctx, id)
			cancel()
		}
	}
}

// cloneAttrs copies e's attributes (not its chunks, size or MD5).
func cloneAttrs(e *filerpb.Entry) *filerpb.Entry {
	ne := &filerpb.Entry{Path: e.Path, Mode: e.Mode, Uid: e.Uid, Gid: e.Gid, MtimeNs: e.MtimeNs,
		CrtimeNs: e.CrtimeNs, Mime: e.Mime, SymlinkTarget: e.SymlinkTarget, IsDir: e.IsDir}
	if len(e.UserMetadata) > 0 {
		ne.UserMetadata = make(map[string]string, len(e.UserMetadata))
		for k, v := range e.UserMetadata {
			ne.UserMetadata[k] = v
		}
	}
	if len(e.Xattrs) > 0 {
		ne.Xattrs = make(map[string][]byte, len(e.Xattrs))
		for k, v := range e.Xattrs {
			ne.Xattrs[k] = v
		}
	}
	return ne
}

type blobs struct{ s *Site }

func (b blobs) Put(ctx context.Context, data []byte) (string, error) {
	id, _, err := b.s.cl.PutBytes(ctx, b.s.req, data, client.UploadOptions{})
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

func (b blobs) Open(ctx context.Context, s string, off, n int64) (io.ReadCloser, error) {
	id, err := fid.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("chunk %q: %w", s, err)
	}
	if n == 0 {
		return io.NopCloser(strings.NewReader("")), nil
	}
	var rng *client.Range
	if off > 0 || n > 0 {
		rng = &client.Range{Offset: off, Length: max(n, 0)}
	}
	body, _, err := b.s.cl.Get(ctx, id, rng)
	return body, err
}

func fromPBChunks(in []*filerpb.Chunk) []chunk.Chunk {
	out := make([]chunk.Chunk, 0, len(in))
	for _, c := range in {
		out = append(out, chunk.Chunk{FID: c.Fid, Offset: c.Offset, Size: c.Size, Mtime: c.MtimeNs, ETag: c.Etag, Manifest: c.Manifest, CipherKey: chunk.KeyOf(c.CipherKey)})
	}
	return out
}

func toPBChunks(in []chunk.Chunk) []*filerpb.Chunk {
	out := make([]*filerpb.Chunk, 0, len(in))
	for _, c := range in {
		out = append(out, &filerpb.Chunk{Fid: c.FID, Offset: c.Offset, Size: c.Size, MtimeNs: c.Mtime, Etag: c.ETag, Manifest: c.Manifest, CipherKey: c.CipherKey})
	}
	return out
}

// EncryptsData reports whether the site's filer encrypts data at rest
// (--encrypt-data): what is read from it is plaintext all the same.
func (s *Site) EncryptsData() bool { return s.conf.GetEncryptData() }

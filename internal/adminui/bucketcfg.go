package adminui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	kauth "github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/filer"
	"github.com/kelpfs/kelp/internal/objectapi"
	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/pb/filerpb"
)

// Bucket settings the filer's HTTP API does not carry (versioning is an
// extended attribute of the bucket's directory) go through its gRPC API;
// quotas too, to use one connection.

// usageWalkLimit bounds the entries counted for the usage of a bucket
// without a quota record.
const usageWalkLimit = 10000

// usagePage is the walk's listing page (a variable for tests).
var usagePage uint32 = 1000

func (u *UI) filerGRPCAddr() (string, error) {
	if u.cfg.FilerGRPC != nil {
		if a := u.cfg.FilerGRPC(); a != "" {
			return a, nil
		}
	}
	addr := u.filerAddr()
	if addr == "" {
		return "", errors.New("no filer configured (kelp master --admin.filer=host:port)")
	}
	return pb.GRPCAddress(addr)
}

// withFiler runs fn with a gRPC client of the filer.
func (u *UI) withFiler(ctx context.Context, fn func(ctx context.Context, fc filerpb.FilerClient) error) error {
	addr, err := u.filerGRPCAddr()
	if err != nil {
		return err
	}
	opts := pb.DialOptions()
	if u.cfg.FilerToken != "" {
		tok := u.cfg.FilerToken
		opts = append(opts, kauth.DialOption(func() string { return tok }))
	}
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return fmt.Errorf("filer %s: %w", addr, err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return fn(ctx, filerpb.NewFilerClient(cc))
}

// bucketInfo is a row of the buckets page.
type bucketInfo struct {
	filerEntry
	Versioning         string // "", Enabled, Suspended
	HasQuota           bool
	MaxBytes, MaxFiles int64
	UsedBytes          int64
	UsedFiles          int64
	Counted            bool // usage counted by a walk, not from a quota record
	Partial            bool // the walk stopped at usageWalkLimit entries
}

// bucketDetails fills in versioning, quota and usage.
func (u *UI) bucketDetails(ctx context.Context, bs []filerEntry) ([]bucketInfo, error) {
	out := make([]bucketInfo, len(bs))
	err := u.withFiler(ctx, func(ctx context.Context, fc filerpb.FilerClient) error {
		for i, b := range bs {
			bi := bucketInfo{filerEntry: b}
			p := path.Join(u.cfg.BucketRoot, b.Name)
			le, err := fc.LookupEntry(ctx, &filerpb.LookupEntryRequest{Path: p})
			if err != nil {
				return fmt.Errorf("bucket %s: %w", b.Name, err)
			}
			bi.Versioning = objectapi.VersioningOf(&filer.Entry{Xattrs: le.Entry.GetXattrs()})
			q, err := fc.Quota(ctx, &filerpb.QuotaRequest{Path: p, Op: filerpb.QuotaRequest_GET})
			switch {
			case err == nil:
				bi.HasQuota, bi.MaxBytes, bi.MaxFiles, bi.UsedBytes, bi.UsedFiles = true, q.MaxBytes, q.MaxFiles, q.UsedBytes, q.UsedFiles
			case status.Code(err) == codes.NotFound:
				bi.Counted = true
				bi.UsedBytes, bi.UsedFiles, bi.Partial, err = countUsage(ctx, fc, p, usageWalkLimit)
				if err != nil {
					return fmt.Errorf("bucket %s: usage: %w", b.Name, err)
				}
			default:
				return fmt.Errorf("bucket %s: quota: %w", b.Name, err)
			}
			out[i] = bi
		}
		return nil
	})
	return out, err
}

// countUsage walks dir, adding up the files' sizes, until limit entries
// were seen (partial).
func countUsage(ctx context.Context, fc filerpb.FilerClient, dir string, limit int) (bytes, files int64, partial bool, err error) {
	seen := 0
	queue := []string{dir}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		after := ""
		for {
			st, err := fc.ListEntries(ctx, &filerpb.ListEntriesRequest{Dir: d, StartAfter: after, Limit: usagePage})
			if err != nil {
				return bytes, files, false, err
			}
			more := false
			for {
				r, err := st.Recv()
				if err == io.EOF {
					break
				}
				if err != nil {
					return bytes, files, false, err
				}
				e := r.Entry
				if seen++; seen > limit {
					return bytes, files, true, nil
				}
				after, more = path.Base(e.Path), r.More
				if e.IsDir {
					queue = append(queue, e.Path)
				} else {
					bytes += e.Size
					files++
				}
			}
			if !more {
				break
			}
		}
	}
	return bytes, files, false, nil
}

// bucketForm is the bucket named by a form, checked.
func (u *UI) bucketForm(r *http.Request) (string, string, error) {
	name := r.FormValue("name")
	if !bucketName.MatchString(name) {
		return "", "", fmt.Errorf("bucket name %q", name)
	}
	return name, path.Join(u.cfg.BucketRoot, name), nil
}

func grpcStatus(err error) int {
	switch status.Code(err) {
	case codes.NotFound:
		return http.StatusNotFound
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		return http.StatusBadRequest
	}
	return http.StatusBadGateway
}

func (u *UI) setVersioning(w http.ResponseWriter, r *http.Request, id identity) {
	name, p, err := u.bucketForm(r)
	if err != nil {
		u.fail(w, r, id, http.StatusBadRequest, err)
		return
	}
	st := r.FormValue("status")
	code := http.StatusBadGateway
	err = u.withFiler(r.Context(), func(ctx context.Context, fc filerpb.FilerClient) error {
		le, err := fc.LookupEntry(ctx, &filerpb.LookupEntryRequest{Path: p})
		if err != nil {
			code = grpcStatus(err)
			return err
		}
		e := le.Entry
		if !e.IsDir {
			code = http.StatusNotFound
			return fmt.Errorf("no bucket %s", name)
		}
		fe := &filer.Entry{Xattrs: e.Xattrs}
		if err := objectapi.SetVersioning(fe, st); err != nil {
			code = http.StatusBadRequest
			if errors.Is(err, objectapi.ErrInvalidBucketState) {
				code = http.StatusConflict
			}
			return err
		}
		e.Xattrs = fe.Xattrs
		_, err = fc.UpdateEntry(ctx, &filerpb.UpdateEntryRequest{Entry: e})
		return err
	})
	if err != nil {
		u.fail(w, r, id, code, fmt.Errorf("versioning of %s: %w", name, err))
		return
	}
	u.log.Info("admin bucket versioning", "user", id.user, "bucket", name, "status", st)
	http.Redirect(w, r, "/buckets", http.StatusSeeOther)
}

// parseBytes reads a size: a number of bytes, optionally with a suffix
// K, M, G, T, P (powers of 1024, "KiB"/"KB" alike); "" and 0 are no limit.
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(strings.ToUpper(s))
	if s == "" {
		return 0, nil
	}
	mult := int64(1)
	s = strings.TrimSuffix(strings.TrimSuffix(s, "B"), "I")
	for i, suf := range []string{"K", "M", "G", "T", "P"} {
		if t, ok := strings.CutSuffix(s, suf); ok {
			s, mult = strings.TrimSpace(t), int64(1)<<(10*(i+1))
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("size %q: want a number of bytes, optionally with K, M, G, T or P", s)
	}
	return n * mult, nil
}

func (u *UI) setQuota(w http.ResponseWriter, r *http.Request, id identity) {
	name, p, err := u.bucketForm(r)
	if err != nil {
		u.fail(w, r, id, http.StatusBadRequest, err)
		return
	}
	req := &filerpb.QuotaRequest{Path: p, Op: filerpb.QuotaRequest_SET}
	if r.FormValue("remove") != "" {
		req.Op = filerpb.QuotaRequest_REMOVE
	} else {
		if req.MaxBytes, err = parseBytes(r.FormValue("bytes")); err != nil {
			u.fail(w, r, id, http.StatusBadRequest, err)
			return
		}
		files := strings.TrimSpace(r.FormValue("files"))
		if files != "" {
			if req.MaxFiles, err = strconv.ParseInt(files, 10, 64); err != nil || req.MaxFiles < 0 {
				u.fail(w, r, id, http.StatusBadRequest, fmt.Errorf("files %q: want a count, 0 or more", files))
				return
			}
		}
		if req.MaxBytes == 0 && req.MaxFiles == 0 {
			u.fail(w, r, id, http.StatusBadRequest, errors.New("give a byte or a file limit (or remove the quota)"))
			return
		}
	}
	code := http.StatusBadGateway
	err = u.withFiler(r.Context(), func(ctx context.Context, fc filerpb.FilerClient) error {
		_, err := fc.Quota(ctx, req)
		if err != nil {
			code = grpcStatus(err)
		}
		return err
	})
	if err != nil {
		u.fail(w, r, id, code, fmt.Errorf("quota of %s: %w", name, err))
		return
	}
	u.log.Info("admin bucket quota", "user", id.user, "bucket", name, "op", req.Op.String(), "bytes", req.MaxBytes, "files", req.MaxFiles)
	http.Redirect(w, r, "/buckets", http.StatusSeeOther)
}

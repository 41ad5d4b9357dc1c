package s3

import (
	"encoding/xml"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/kelpfs/kelp/internal/objectapi"
)

type listAllMyBucketsResult struct {
	XMLName           xml.Name `xml:"ListAllMyBucketsResult"`
	Xmlns             string   `xml:"xmlns,attr"`
	Owner             owner
	Buckets           []bucketXML `xml:"Buckets>Bucket"`
	ContinuationToken string      `xml:",omitempty"`
	Prefix            string      `xml:",omitempty"`
}

type bucketXML struct {
	Name         string
	CreationDate string
	BucketRegion string `xml:",omitempty"`
}

func (rq *request) owner() owner {
	if rq.id == nil {
		return owner{ID: "anonymous", DisplayName: "anonymous"}
	}
	return owner{ID: rq.id.CanonicalID, DisplayName: rq.id.DisplayName}
}

// listBuckets lists the buckets the identity owns or the operator gave it
// (Admin, scoped actions), in name order,
// optionally by prefix and in pages (max-buckets, continuation-token: the
// last name of the previous page).
func (s *Server) listBuckets(rq *request) error {
	maxBuckets := 10000
	if v := rq.q.Get("max-buckets"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			return &apiError{Code: "InvalidArgument", Status: http.StatusBadRequest, Message: "max-buckets must be an integer from 1 to 10000"}
		}
		maxBuckets = n
	}
	prefix, after := rq.q.Get("prefix"), rq.q.Get("continuation-token")
	bs, err := s.layer.ListBuckets(rq.ctx)
	if err != nil {
		return err
	}
	out := listAllMyBucketsResult{Xmlns: s3NS, Owner: rq.owner(), Buckets: []bucketXML{}, Prefix: prefix}
	for _, b := range bs {
		mine := b.Owner != "" && b.Owner == rq.id.CanonicalID
		if !mine && !rq.id.anyOn(b.Name) || !strings.HasPrefix(b.Name, prefix) || b.Name <= after {
			continue
		}
		if len(out.Buckets) == maxBuckets {
			out.ContinuationToken = out.Buckets[len(out.Buckets)-1].Name
			break
		}
		out.Buckets = append(out.Buckets, bucketXML{Name: b.Name, CreationDate: isoTime(b.Created), BucketRegion: s.cfg.Region})
	}
	writeXML(rq.w, http.StatusOK, out)
	return nil
}

type createBucketConfiguration struct {
	LocationConstraint string
}

func (s *Server) createBucket(rq *request) error {
	// The body, if any, names a location; every location is this one.
	if rq.r.ContentLength != 0 {
		var cfg createBucketConfiguration
		b, err := io.ReadAll(io.LimitReader(rq.r.Body, maxXMLBody))
		if err != nil {
			return err
		}
		if len(b) > 0 && xml.Unmarshal(b, &cfg) != nil {
			return errMalformedXML
		}
	}
	if err := s.createOwnedBucket(rq); err != nil {
		return err
	}
	if err := s.objectLockOnCreate(rq); err != nil {
		return err
	}
	rq.w.Header().Set("Location", "/"+rq.bucket)
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) deleteBucket(rq *request) error {
	if err := s.layer.DeleteBucket(rq.ctx, rq.bucket); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) headBucket(rq *request) error {
	if _, err := s.layer.GetBucket(rq.ctx, rq.bucket); err != nil {
		return err
	}
	rq.w.Header().Set("x-amz-bucket-region", s.cfg.Region)
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

type locationConstraint struct {
	XMLName xml.Name `xml:"LocationConstraint"`
	Xmlns   string   `xml:"xmlns,attr"`
	Value   string   `xml:",chardata"`
}

func (s *Server) getBucketLocation(rq *request) error {
	if _, err := s.layer.GetBucket(rq.ctx, rq.bucket); err != nil {
		return err
	}
	loc := s.cfg.Region
	if loc == "us-east-1" {
		loc = "" // S3 reports the default region as an empty constraint
	}
	writeXML(rq.w, http.StatusOK, locationConstraint{Xmlns: s3NS, Value: loc})
	return nil
}

type versioningConfiguration struct {
	XMLName   xml.Name `xml:"VersioningConfiguration"`
	Xmlns     string   `xml:"xmlns,attr,omitempty"`
	Status    string   `xml:",omitempty"`
	MfaDelete string   `xml:",omitempty"`
}

func (s *Server) getBucketVersioning(rq *request) error {
	st, err := s.layer.GetBucketVersioning(rq.ctx, rq.bucket)
	if err != nil {
		return err
	}
	writeXML(rq.w, http.StatusOK, versioningConfiguration{Xmlns: s3NS, Status: st})
	return nil
}

// putBucketVersioning sets Enabled or Suspended. MFA delete is refused:
// the gateway has no MFA devices.
func (s *Server) putBucketVersioning(rq *request) error {
	var v versioningConfiguration
	if err := readXML(rq.r, &v); err != nil {
		return err
	}
	if v.MfaDelete == "Enabled" {
		return errNotImplemented
	}
	if v.Status != objectapi.VersioningEnabled && v.Status != objectapi.VersioningSuspended {
		return errMalformedXML
	}
	if err := s.layer.PutBucketVersioning(rq.ctx, rq.bucket, v.Status); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

// listVersionsResult is ListObjectVersions' document; versions and delete
// markers are interleaved in list order, as S3 sends them.
type listVersionsResult struct {
	XMLName             xml.Name `xml:"ListVersionsResult"`
	Xmlns               string   `xml:"xmlns,attr"`
	Name                string
	Prefix              string
	KeyMarker           string
	VersionIDMarker     string `xml:"VersionIdMarker"`
	NextKeyMarker       string `xml:",omitempty"`
	NextVersionIDMarker string `xml:"NextVersionIdMarker,omitempty"`
	MaxKeys             int
	Delimiter           string `xml:",omitempty"`
	IsTruncated         bool
	EncodingType        string         `xml:",omitempty"`
	Entries             []versionXML   // <Version> or <DeleteMarker>, by XMLName
	CommonPrefixes      []commonPrefix `xml:"CommonPrefixes"`
}

type versionXML struct {
	XMLName      xml.Name
	Key          string
	VersionID    string `xml:"VersionId"`
	IsLatest     bool
	LastModified string
	ETag         string `xml:",omitempty"`
	Size         *int64 `xml:",omitempty"`
	Owner        owner
	StorageClass string `xml:",omitempty"`
}

func (s *Server) listObjectVersions(rq *request) error {
	q := rq.q
	maxKeys, err := maxKeysParam(q, "max-keys")
	if err != nil {
		return err
	}
	vm := q.Get("version-id-marker")
	if vm != "" && q.Get("key-marker") == "" {
		return &apiError{Code: "InvalidArgument", Status: 400, Message: "A version-id marker cannot be specified without a key marker."}
	}
	e := encoder(q.Get("encoding-type") == "url")
	res, err := s.layer.ListObjectVersions(rq.ctx, rq.bucket, objectapi.ListVersionsOptions{
		Prefix: q.Get("prefix"), Delimiter: q.Get("delimiter"), KeyMarker: q.Get("key-marker"), VersionIDMarker: vm, MaxKeys: maxKeys})
	if err != nil {
		return err
	}
	out := listVersionsResult{Xmlns: s3NS, Name: rq.bucket, Prefix: e.enc(q.Get("prefix")), KeyMarker: e.enc(q.Get("key-marker")),
		VersionIDMarker: vm, MaxKeys: maxKeys, Delimiter: e.enc(q.Get("delimiter")), IsTruncated: res.IsTruncated}
	if e {
		out.EncodingType = "url"
	}
	if res.IsTruncated {
		out.NextKeyMarker, out.NextVersionIDMarker = e.enc(res.NextKeyMarker), res.NextVersionIDMarker
	}
	out.Entries = make([]versionXML, 0, len(res.Versions))
	for _, o := range res.Versions {
		v := versionXML{XMLName: xml.Name{Local: "Version"}, Key: e.enc(o.Key), VersionID: o.VersionID, IsLatest: o.IsLatest,
			LastModified: isoTime(o.LastModified), Owner: s.objectOwnerXML(rq, o)}
		if o.DeleteMarker {
			v.XMLName.Local = "DeleteMarker"
		} else {
			v.ETag, v.Size, v.StorageClass = quote(o.ETag), &o.Size, "STANDARD"
		}
		out.Entries = append(out.Entries, v)
	}
	for _, p := range res.CommonPrefixes {
		out.CommonPrefixes = append(out.CommonPrefixes, commonPrefix{e.enc(p)})
	}
	sendXML(rq.w, http.StatusOK, &out)
	return nil
}

package s3

import (
	"encoding/base64"
	"encoding/xml"
	"net/http"
	"net/url"
	"strconv"

	"github.com/kelpfs/kelp/internal/objectapi"
)

type commonPrefix struct {
	Prefix string
}

type objectXML struct {
	Key          string
	LastModified string
	ETag         string
	Size         int64
	StorageClass string
	Owner        *owner `xml:",omitempty"`
	// ChecksumAlgorithm lists the object's checksum, as S3 does.
	ChecksumAlgorithm string `xml:",omitempty"`
}

type listBucketResult struct {
	XMLName        xml.Name `xml:"ListBucketResult"`
	Xmlns          string   `xml:"xmlns,attr"`
	Name           string
	Prefix         string
	Marker         *string `xml:",omitempty"`
	NextMarker     string  `xml:",omitempty"`
	StartAfter     string  `xml:",omitempty"`
	ContToken      string  `xml:"ContinuationToken,omitempty"`
	NextContToken  string  `xml:"NextContinuationToken,omitempty"`
	KeyCount       *int    `xml:",omitempty"`
	MaxKeys        int
	Delimiter      string `xml:",omitempty"`
	EncodingType   string `xml:",omitempty"`
	IsTruncated    bool
	Contents       []objectXML    `xml:"Contents"`
	CommonPrefixes []commonPrefix `xml:"CommonPrefixes"`
}

// maxKeysParam parses a max-keys style parameter: default and cap 1000.
func maxKeysParam(q url.Values, name string) (int, error) {
	v := q.Get(name)
	if v == "" {
		return 1000, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, &apiError{Code: "InvalidArgument", Status: 400, Message: name + " must be a non-negative integer"}
	}
	return min(n, 1000), nil
}

func (s *Server) list(rq *request, after string, v2 bool) (listBucketResult, error) {
	q := rq.q
	maxKeys, err := maxKeysParam(q, "max-keys")
	if err != nil {
		return listBucketResult{}, err
	}
	switch et := q.Get("encoding-type"); et {
	case "", "url":
	default:
		return listBucketResult{}, &apiError{Code: "InvalidArgument", Status: 400, Message: "Invalid Encoding Method specified in Request"}
	}
	e := encoder(q.Get("encoding-type") == "url")
	res, err := s.layer.ListObjects(rq.ctx, rq.bucket, objectapi.ListOptions{
		Prefix: q.Get("prefix"), Delimiter: q.Get("delimiter"), After: after, MaxKeys: maxKeys})
	if err != nil {
		return listBucketResult{}, err
	}
	out := listBucketResult{Xmlns: s3NS, Name: rq.bucket, Prefix: e.enc(q.Get("prefix")), MaxKeys: maxKeys,
		Delimiter: e.enc(q.Get("delimiter")), IsTruncated: res.IsTruncated,
		Contents: make([]objectXML, 0, len(res.Objects))}
	if e {
		out.EncodingType = "url"
	}
	fetchOwner := !v2 || q.Get("fetch-owner") == "true"
	for _, o := range res.Objects {
		x := objectXML{Key: e.enc(o.Key), LastModified: isoTime(o.LastModified), ETag: quote(o.ETag), Size: o.Size,
			StorageClass: "STANDARD", ChecksumAlgorithm: o.Checksum.Algorithm}
		if fetchOwner {
			ow := s.objectOwnerXML(rq, o)
			x.Owner = &ow
		}
		out.Contents = append(out.Contents, x)
	}
	for _, p := range res.CommonPrefixes {
		out.CommonPrefixes = append(out.CommonPrefixes, commonPrefix{e.enc(p)})
	}
	if len(out.Contents) == 0 {
		out.Contents = nil
	}
	if res.IsTruncated && !v2 {
		out.NextMarker = e.enc(res.Next)
	}
	if res.IsTruncated && v2 {
		out.NextContToken = base64.URLEncoding.EncodeToString([]byte(res.Next))
	}
	if v2 {
		n := len(res.Objects) + len(res.CommonPrefixes)
		out.KeyCount = &n
	}
	return out, nil
}

func (s *Server) listObjectsV1(rq *request) error {
	marker := rq.q.Get("marker")
	out, err := s.list(rq, marker, false)
	if err != nil {
		return err
	}
	m := encoder(rq.q.Get("encoding-type") == "url").enc(marker)
	out.Marker = &m
	sendXML(rq.w, http.StatusOK, &out)
	return nil
}

func (s *Server) listObjectsV2(rq *request) error {
	after := rq.q.Get("start-after")
	tok := rq.q.Get("continuation-token")
	if tok != "" { // an empty token is no token, as in S3
		b, err := base64.URLEncoding.DecodeString(tok)
		if err != nil {
			return &apiError{Code: "InvalidArgument", Status: 400, Message: "The continuation token provided is incorrect"}
		}
		if string(b) > after {
			after = string(b)
		}
	}
	out, err := s.list(rq, after, true)
	if err != nil {
		return err
	}
	out.ContToken = tok
	out.StartAfter = encoder(rq.q.Get("encoding-type") == "url").enc(rq.q.Get("start-after"))
	sendXML(rq.w, http.StatusOK, &out)
	return nil
}

type listUploadsResult struct {
	XMLName            xml.Name `xml:"ListMultipartUploadsResult"`
	Xmlns              string   `xml:"xmlns,attr"`
	Bucket             string
	KeyMarker          string
	UploadIDMarker     string `xml:"UploadIdMarker"`
	NextKeyMarker      string
	NextUploadIDMarker string `xml:"NextUploadIdMarker"`
	Prefix             string
	Delimiter          string `xml:",omitempty"`
	MaxUploads         int
	EncodingType       string `xml:",omitempty"`
	IsTruncated        bool
	Uploads            []uploadXML    `xml:"Upload"`
	CommonPrefixes     []commonPrefix `xml:"CommonPrefixes"`
}

type uploadXML struct {
	Key          string
	UploadID     string `xml:"UploadId"`
	Initiator    owner
	Owner        owner
	StorageClass string
	Initiated    string
}

func (s *Server) listUploads(rq *request) error {
	q := rq.q
	max, err := maxKeysParam(q, "max-uploads")
	if err != nil {
		return err
	}
	e := encoder(q.Get("encoding-type") == "url")
	res, err := s.layer.ListMultipartUploads(rq.ctx, rq.bucket, objectapi.ListUploadsOptions{
		Prefix: q.Get("prefix"), Delimiter: q.Get("delimiter"), KeyMarker: q.Get("key-marker"),
		UploadIDMarker: q.Get("upload-id-marker"), MaxUploads: max})
	if err != nil {
		return err
	}
	out := listUploadsResult{Xmlns: s3NS, Bucket: rq.bucket, KeyMarker: e.enc(q.Get("key-marker")),
		UploadIDMarker: q.Get("upload-id-marker"), Prefix: e.enc(q.Get("prefix")), Delimiter: e.enc(q.Get("delimiter")),
		MaxUploads: max, IsTruncated: res.IsTruncated}
	if e {
		out.EncodingType = "url"
	}
	if res.IsTruncated {
		out.NextKeyMarker, out.NextUploadIDMarker = e.enc(res.NextKeyMarker), res.NextUploadIDMarker
	}
	for _, u := range res.Uploads {
		out.Uploads = append(out.Uploads, uploadXML{Key: e.enc(u.Key), UploadID: u.UploadID, Initiator: s.ownerOf(u.Initiator),
			Owner: s.ownerOf(u.Initiator), StorageClass: "STANDARD", Initiated: isoTime(u.Initiated)})
	}
	for _, p := range res.CommonPrefixes {
		out.CommonPrefixes = append(out.CommonPrefixes, commonPrefix{e.enc(p)})
	}
	sendXML(rq.w, http.StatusOK, &out)
	return nil
}

package s3

import (
	"encoding/xml"
	"net/http"
	"strconv"
	"strings"

	"github.com/kelpfs/kelp/internal/objectapi"
)

type initiateResult struct {
	XMLName  xml.Name `xml:"InitiateMultipartUploadResult"`
	Xmlns    string   `xml:"xmlns,attr"`
	Bucket   string
	Key      string
	UploadID string `xml:"UploadId"`
}

func (s *Server) createUpload(rq *request) error {
	md, err := metadata(rq.r)
	if err != nil {
		return err
	}
	if err := s.objectAccess(rq, rq.r.Header, &md); err != nil {
		return err
	}
	alg := ""
	if a := rq.r.Header.Get("x-amz-checksum-algorithm"); a != "" {
		if alg = objectapi.NormalizeChecksumAlgorithm(a); alg == "" {
			return &apiError{Code: "InvalidRequest", Status: 400, Message: "Checksum algorithm provided is unsupported."}
		}
	}
	typ := rq.r.Header.Get("x-amz-checksum-type")
	switch typ {
	case "", objectapi.ChecksumComposite, objectapi.ChecksumFullObject:
	default:
		return &apiError{Code: "InvalidRequest", Status: 400, Message: "The x-amz-checksum-type header is not valid."}
	}
	typ, err = objectapi.MultipartChecksumType(alg, typ)
	if err != nil {
		return err
	}
	if md.Encryption, err = s.encryptionFor(rq, rq.bucket, rq.key, rq.r.Header); err != nil {
		return err
	}
	id, err := s.layer.CreateMultipartUploadAs(rq.ctx, rq.bucket, rq.key, rq.myID(), md, alg, typ)
	if err != nil {
		return err
	}
	if md.Encryption != nil {
		sseHeaders(rq.w.Header(), md.Encryption.Meta, rq.r.Header, true)
	}
	if alg != "" {
		rq.w.Header().Set("x-amz-checksum-algorithm", alg)
		rq.w.Header().Set("x-amz-checksum-type", typ)
	}
	writeXML(rq.w, http.StatusOK, initiateResult{Xmlns: s3NS, Bucket: rq.bucket, Key: rq.key, UploadID: id})
	return nil
}

func partNumber(rq *request) (int, error) {
	n, err := strconv.Atoi(rq.q.Get("partNumber"))
	if err != nil || n < 1 || n > objectapi.MaxParts {
		return 0, &apiError{Code: "InvalidArgument", Status: 400, Message: "Part number must be an integer between 1 and 10000, inclusive"}
	}
	return n, nil
}

func (s *Server) uploadPart(rq *request) error {
	n, err := partNumber(rq)
	if err != nil {
		return err
	}
	sum, err := contentMD5(rq.r)
	if err != nil {
		return err
	}
	cs, err := checksumSpec(rq)
	if err != nil {
		return err
	}
	size := bodySize(rq)
	if size < 0 && len(rq.r.TransferEncoding) == 0 {
		return errMissingLength
	}
	p, err := s.layer.UploadPart(rq.ctx, rq.bucket, rq.key, rq.q.Get("uploadId"), n, rq.r.Body,
		objectapi.PartOptions{Size: size, ContentMD5: sum, Checksum: cs, Keys: s.readKeys(rq)})
	if err != nil {
		return err
	}
	h := rq.w.Header()
	h.Set("ETag", quote(p.ETag))
	sseHeaders(h, p.SSE, rq.r.Header, false)
	if p.Checksum.Algorithm != "" {
		h.Set("x-amz-checksum-"+strings.ToLower(p.Checksum.Algorithm), p.Checksum.Value)
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

type copyPartResult struct {
	XMLName      xml.Name `xml:"CopyPartResult"`
	Xmlns        string   `xml:"xmlns,attr"`
	LastModified string
	ETag         string
}

func (s *Server) uploadPartCopy(rq *request) error {
	n, err := partNumber(rq)
	if err != nil {
		return err
	}
	sb, sk, sv, err := copySource(rq.r.Header)
	if err != nil {
		return err
	}
	if err := s.authorize(rq, copySourceOp(sv), ActionRead, sb, sk); err != nil {
		return err
	}
	var rng *objectapi.Range
	if v := rq.r.Header.Get("x-amz-copy-source-range"); v != "" {
		if rng = objectapi.ParseRange(v); rng == nil || rng.First < 0 || rng.Last < 0 {
			return &apiError{Code: "InvalidArgument", Status: 400, Message: "The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy"}
		}
	}
	p, err := s.layer.UploadPartCopy(rq.ctx, rq.bucket, rq.key, rq.q.Get("uploadId"), n, sb, sk, sv, rng,
		conditions(rq.r.Header, "x-amz-copy-source-"), s.readKeys(rq))
	if err != nil {
		return err
	}
	sseHeaders(rq.w.Header(), p.SSE, rq.r.Header, false)
	if sv != "" {
		rq.w.Header().Set("x-amz-copy-source-version-id", sv)
	}
	writeXML(rq.w, http.StatusOK, copyPartResult{Xmlns: s3NS, LastModified: isoTime(p.LastModified), ETag: quote(p.ETag)})
	return nil
}

type completeRequest struct {
	XMLName xml.Name `xml:"CompleteMultipartUpload"`
	Parts   []struct {
		PartNumber int
		ETag       string
	} `xml:"Part"`
}

type completeResult struct {
	XMLName  xml.Name `xml:"CompleteMultipartUploadResult"`
	Xmlns    string   `xml:"xmlns,attr"`
	Location string
	Bucket   string
	Key      string
	ETag     string
	copyChecksums
	ChecksumType string `xml:",omitempty"`
}

type copyChecksums struct {
	ChecksumCRC32     string `xml:",omitempty"`
	ChecksumCRC32C    string `xml:",omitempty"`
	ChecksumCRC64NVME string `xml:",omitempty"`
	ChecksumSHA1      string `xml:",omitempty"`
	ChecksumSHA256    string `xml:",omitempty"`
}

func (s *Server) completeUpload(rq *request) error {
	var req completeRequest
	if err := readXML(rq.r, &req); err != nil {
		return err
	}
	parts := make([]objectapi.CompletePart, len(req.Parts))
	for i, p := range req.Parts {
		parts[i] = objectapi.CompletePart{Number: p.PartNumber, ETag: p.ETag}
	}
	full := ""
	for _, alg := range objectapi.ChecksumAlgorithms() {
		if v := rq.r.Header.Get("x-amz-checksum-" + strings.ToLower(alg)); v != "" {
			full = v
		}
	}
	oi, err := s.layer.CompleteMultipartUpload(rq.ctx, rq.bucket, rq.key, rq.q.Get("uploadId"), parts, objectapi.CompleteOptions{
		IfNoneMatch: rq.r.Header.Get("If-None-Match"), IfMatch: rq.r.Header.Get("If-Match"),
		IfUnmodifiedSince: ifUnmodifiedSince(rq.r.Header), FullChecksum: full})
	if err != nil {
		return err
	}
	out := completeResult{Xmlns: s3NS, Location: "/" + rq.bucket + "/" + rq.key, Bucket: rq.bucket, Key: rq.key, ETag: quote(oi.ETag)}
	if oi.Checksum.Algorithm != "" {
		c := copyObjectResult{}
		c.setChecksum(oi.Checksum)
		out.copyChecksums = copyChecksums{c.ChecksumCRC32, c.ChecksumCRC32C, c.ChecksumCRC64NVME, c.ChecksumSHA1, c.ChecksumSHA256}
		out.ChecksumType = oi.Checksum.Type
	}
	setVersionID(rq.w.Header(), oi.VersionID)
	sseHeaders(rq.w.Header(), oi.SSE, rq.r.Header, false)
	s.setExpiration(rq, rq.w.Header(), oi)
	writeXML(rq.w, http.StatusOK, out)
	return nil
}

func (s *Server) abortUpload(rq *request) error {
	if err := s.layer.AbortMultipartUpload(rq.ctx, rq.bucket, rq.key, rq.q.Get("uploadId")); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

type listPartsResult struct {
	XMLName              xml.Name `xml:"ListPartsResult"`
	Xmlns                string   `xml:"xmlns,attr"`
	Bucket               string
	Key                  string
	UploadID             string `xml:"UploadId"`
	PartNumberMarker     int
	NextPartNumberMarker int
	MaxParts             int
	IsTruncated          bool
	Initiator            owner
	Owner                owner
	StorageClass         string
	ChecksumAlgorithm    string    `xml:",omitempty"`
	ChecksumType         string    `xml:",omitempty"`
	Parts                []partXML `xml:"Part"`
}

type partXML struct {
	PartNumber   int
	LastModified string
	ETag         string
	Size         int64
	copyChecksums
}

func (s *Server) listParts(rq *request) error {
	max, err := maxKeysParam(rq.q, "max-parts")
	if err != nil {
		return err
	}
	marker := 0
	if v := rq.q.Get("part-number-marker"); v != "" {
		if marker, err = strconv.Atoi(v); err != nil || marker < 0 {
			return &apiError{Code: "InvalidArgument", Status: 400, Message: "part-number-marker must be a non-negative integer"}
		}
	}
	res, err := s.layer.ListParts(rq.ctx, rq.bucket, rq.key, rq.q.Get("uploadId"), marker, max)
	if err != nil {
		return err
	}
	out := listPartsResult{Xmlns: s3NS, Bucket: rq.bucket, Key: rq.key, UploadID: rq.q.Get("uploadId"),
		PartNumberMarker: marker, NextPartNumberMarker: res.NextPartMarker, MaxParts: max, IsTruncated: res.IsTruncated,
		Initiator: s.ownerOf(res.Initiator), Owner: s.ownerOf(res.Initiator), StorageClass: "STANDARD",
		ChecksumAlgorithm: res.Checksum.Algorithm}
	if res.Checksum.Algorithm != "" {
		out.ChecksumType = res.Checksum.Type
	}
	for _, p := range res.Parts {
		c := copyObjectResult{}
		c.setChecksum(p.Checksum)
		out.Parts = append(out.Parts, partXML{PartNumber: p.Number, LastModified: isoTime(p.LastModified), ETag: quote(p.ETag), Size: p.Size,
			copyChecksums: copyChecksums{c.ChecksumCRC32, c.ChecksumCRC32C, c.ChecksumCRC64NVME, c.ChecksumSHA1, c.ChecksumSHA256}})
	}
	sendXML(rq.w, http.StatusOK, &out)
	return nil
}

package s3

import (
	"encoding/xml"
	"net/http"
	"strconv"
	"strings"

	"github.com/kelpfs/kelp/internal/objectapi"
)

// GetObjectAttributes: the attributes named in x-amz-object-attributes
// (ETag, Checksum, ObjectParts, StorageClass, ObjectSize) without the body.

type objectAttributes struct {
	XMLName      xml.Name        `xml:"GetObjectAttributesResponse"`
	Xmlns        string          `xml:"xmlns,attr"`
	ETag         string          `xml:",omitempty"`
	Checksum     *checksumFields `xml:"Checksum,omitempty"`
	ObjectParts  *objectPartsXML `xml:",omitempty"`
	StorageClass string          `xml:",omitempty"`
	ObjectSize   *int64          `xml:",omitempty"`
}

type objectPartsXML struct {
	TotalPartsCount      int `xml:"PartsCount"` // the element's name in S3's schema
	PartNumberMarker     int
	NextPartNumberMarker int
	MaxParts             int
	IsTruncated          bool
	Parts                []attributePart `xml:"Part"`
}

type attributePart struct {
	PartNumber int
	Size       int64
}

func (s *Server) getObjectAttributes(rq *request) error {
	want := map[string]bool{}
	// A list header: one comma-separated value, or several values.
	for _, v := range rq.r.Header.Values("x-amz-object-attributes") {
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				want[a] = true
			}
		}
	}
	if len(want) == 0 {
		return &apiError{Code: "InvalidArgument", Status: http.StatusBadRequest,
			Message: "The x-amz-object-attributes header specifying the attributes to be retrieved is either missing or empty"}
	}
	for a := range want {
		switch a {
		case "ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize":
		default:
			return &apiError{Code: "InvalidArgument", Status: http.StatusBadRequest, Message: "Invalid attribute name specified: " + a}
		}
	}
	maxParts, marker := 1000, 0
	if v := rq.r.Header.Get("x-amz-max-parts"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return &apiError{Code: "InvalidArgument", Status: http.StatusBadRequest, Message: "x-amz-max-parts must be a non-negative integer"}
		}
		maxParts = min(n, 1000)
	}
	if v := rq.r.Header.Get("x-amz-part-number-marker"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return &apiError{Code: "InvalidArgument", Status: http.StatusBadRequest, Message: "x-amz-part-number-marker must be a non-negative integer"}
		}
		marker = n
	}
	o, err := s.layer.GetObject(rq.ctx, rq.bucket, rq.key, objectapi.GetOptions{NoBody: true, VersionID: rq.q.Get("versionId"),
		Conditions: conditions(rq.r.Header, ""), Keys: s.readKeys(rq)})
	if err != nil {
		return err
	}
	oi := o.Info
	out := objectAttributes{Xmlns: s3NS}
	if want["ETag"] {
		out.ETag = oi.ETag
	}
	if want["Checksum"] && oi.Checksum.Algorithm != "" {
		out.Checksum = &checksumFields{}
		out.Checksum.setChecksum(oi.Checksum)
	}
	if want["StorageClass"] {
		out.StorageClass = "STANDARD"
	}
	if want["ObjectSize"] {
		out.ObjectSize = &oi.Size
	}
	if want["ObjectParts"] && len(oi.PartSizes) > 0 {
		p := &objectPartsXML{TotalPartsCount: len(oi.PartSizes), PartNumberMarker: marker, MaxParts: maxParts}
		for n := marker + 1; n <= len(oi.PartSizes); n++ {
			if len(p.Parts) == maxParts {
				p.IsTruncated = true
				break
			}
			p.Parts = append(p.Parts, attributePart{PartNumber: n, Size: oi.PartSizes[n-1]})
			p.NextPartNumberMarker = n
		}
		out.ObjectParts = p
	}
	h := rq.w.Header()
	h.Set("Last-Modified", oi.LastModified.UTC().Format(http.TimeFormat))
	setVersionID(h, oi.VersionID)
	writeXML(rq.w, http.StatusOK, out)
	return nil
}

package s3

import (
	"encoding/xml"
	"net/http"

	"github.com/kelpfs/kelp/internal/objectapi"
)

// deleteObject deletes the latest version (a delete marker in versioned
// buckets) or, with ?versionId=, that version permanently.
func (s *Server) deleteObject(rq *request) error {
	cond, err := deleteConditions(rq.r.Header)
	if err != nil {
		return err
	}
	ctx := s.bypassContext(rq, rq.key)
	res, err := s.layer.DeleteObjectIf(ctx, rq.bucket, rq.key, rq.q.Get("versionId"), cond)
	if err != nil {
		return err
	}
	setVersionID(rq.w.Header(), res.VersionID)
	if res.DeleteMarker {
		rq.w.Header().Set("x-amz-delete-marker", "true")
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

type deleteRequest struct {
	XMLName xml.Name `xml:"Delete"`
	Quiet   bool
	Objects []struct {
		Key       string
		VersionID string `xml:"VersionId"`
		// Preconditions of the deletion of this object.
		ETag             string
		LastModifiedTime string
		Size             string
	} `xml:"Object"`
}

type deleteResult struct {
	XMLName xml.Name       `xml:"DeleteResult"`
	Xmlns   string         `xml:"xmlns,attr"`
	Deleted []deletedXML   `xml:"Deleted"`
	Errors  []deleteErrXML `xml:"Error"`
}

// deletedXML reports one deletion; a created delete marker's id is
// DeleteMarkerVersionId, a deleted version's is VersionId.
type deletedXML struct {
	Key                   string
	VersionID             string `xml:"VersionId,omitempty"`
	DeleteMarker          bool   `xml:",omitempty"`
	DeleteMarkerVersionID string `xml:"DeleteMarkerVersionId,omitempty"`
}

type deleteErrXML struct {
	Key       string
	VersionID string `xml:"VersionId,omitempty"`
	Code      string
	Message   string
}

// maxDeleteKeys is S3's limit on keys per DeleteObjects.
const maxDeleteKeys = 1000

func (s *Server) deleteObjects(rq *request) error {
	var req deleteRequest
	if err := readXML(rq.r, &req); err != nil {
		return err
	}
	if len(req.Objects) == 0 || len(req.Objects) > maxDeleteKeys {
		return errMalformedXML
	}
	// Each key is authorised on its own (a bucket policy may allow or
	// deny some keys only); the refused ones are reported as AccessDenied.
	var objs []objectapi.ObjectToDelete
	out := deleteResult{Xmlns: s3NS}
	for _, o := range req.Objects {
		op := "DeleteObject"
		if o.VersionID != "" {
			op = "DeleteObjectVersion"
		}
		if o.Key != "" { // an empty key is the layer's InvalidArgument
			if err := s.authorize(rq, op, ActionWrite, rq.bucket, o.Key); err != nil {
				ae := toAPIError(err)
				out.Errors = append(out.Errors, deleteErrXML{Key: o.Key, VersionID: o.VersionID, Code: ae.Code, Message: ae.Message})
				continue
			}
		}
		cond, err := deleteObjectConditions(o.ETag, o.LastModifiedTime, o.Size)
		if err != nil {
			return err
		}
		objs = append(objs, objectapi.ObjectToDelete{Key: o.Key, VersionID: o.VersionID, Conditions: cond})
	}
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	res, err := s.layer.DeleteObjects(s.bypassContext(rq, keys...), rq.bucket, objs)
	if err != nil {
		return err
	}
	for i, r := range res {
		if r.Err != nil {
			ae := toAPIError(r.Err)
			out.Errors = append(out.Errors, deleteErrXML{Key: r.Key, VersionID: objs[i].VersionID, Code: ae.Code, Message: ae.Message})
			continue
		}
		if req.Quiet {
			continue
		}
		d := deletedXML{Key: r.Key, VersionID: objs[i].VersionID, DeleteMarker: r.DeleteMarker}
		if objs[i].VersionID == "" && r.DeleteMarker {
			d.DeleteMarkerVersionID = r.VersionID
		}
		out.Deleted = append(out.Deleted, d)
	}
	writeXML(rq.w, http.StatusOK, out)
	return nil
}

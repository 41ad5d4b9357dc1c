package s3

import (
	"encoding/xml"
	"net/http"
)

func (s *Server) deleteObject(rq *request) error {
	if v := rq.q.Get("versionId"); v != "" && v != "null" {
		rq.w.WriteHeader(http.StatusNoContent) // no such version: nothing to delete
		return nil
	}
	if err := s.layer.DeleteObject(rq.ctx, rq.bucket, rq.key); err != nil {
		return err
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
	} `xml:"Object"`
}

type deleteResult struct {
	XMLName xml.Name       `xml:"DeleteResult"`
	Xmlns   string         `xml:"xmlns,attr"`
	Deleted []deletedXML   `xml:"Deleted"`
	Errors  []deleteErrXML `xml:"Error"`
}

type deletedXML struct {
	Key       string
	VersionID string `xml:"VersionId,omitempty"`
}

type deleteErrXML struct {
	Key     string
	Code    string
	Message string
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
	keys := make([]string, len(req.Objects))
	for i, o := range req.Objects {
		keys[i] = o.Key
	}
	res, err := s.layer.DeleteObjects(rq.ctx, rq.bucket, keys)
	if err != nil {
		return err
	}
	out := deleteResult{Xmlns: s3NS}
	for i, r := range res {
		if r.Err != nil {
			ae := toAPIError(r.Err)
			out.Errors = append(out.Errors, deleteErrXML{Key: r.Key, Code: ae.Code, Message: ae.Message})
			continue
		}
		if !req.Quiet {
			out.Deleted = append(out.Deleted, deletedXML{Key: r.Key, VersionID: req.Objects[i].VersionID})
		}
	}
	writeXML(rq.w, http.StatusOK, out)
	return nil
}

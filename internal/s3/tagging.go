package s3

import (
	"encoding/xml"
	"net/http"

	"github.com/kelpfs/kelp/internal/objectapi"
)

type tagging struct {
	XMLName xml.Name `xml:"Tagging"`
	Xmlns   string   `xml:"xmlns,attr,omitempty"`
	TagSet  []tagXML `xml:"TagSet>Tag"`
}

type tagXML struct {
	Key   string
	Value string
}

func toTagging(tags []objectapi.Tag) tagging {
	t := tagging{Xmlns: s3NS, TagSet: []tagXML{}}
	for _, x := range tags {
		t.TagSet = append(t.TagSet, tagXML{x.Key, x.Value})
	}
	return t
}

func readTagging(r *http.Request) ([]objectapi.Tag, error) {
	var t tagging
	if err := readXML(r, &t); err != nil {
		return nil, err
	}
	out := make([]objectapi.Tag, len(t.TagSet))
	for i, x := range t.TagSet {
		out[i] = objectapi.Tag{Key: x.Key, Value: x.Value}
	}
	return out, nil
}

func (s *Server) getObjectTagging(rq *request) error {
	tags, err := s.layer.GetObjectTagging(rq.ctx, rq.bucket, rq.key, rq.q.Get("versionId"))
	if err != nil {
		return err
	}
	writeXML(rq.w, http.StatusOK, toTagging(tags))
	return nil
}

func (s *Server) putObjectTagging(rq *request) error {
	tags, err := readTagging(rq.r)
	if err != nil {
		return err
	}
	if err := s.layer.PutObjectTagging(rq.ctx, rq.bucket, rq.key, rq.q.Get("versionId"), tags); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) deleteObjectTagging(rq *request) error {
	if err := s.layer.PutObjectTagging(rq.ctx, rq.bucket, rq.key, rq.q.Get("versionId"), nil); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) getBucketTagging(rq *request) error {
	tags, err := s.layer.GetBucketTagging(rq.ctx, rq.bucket)
	if err != nil {
		return err
	}
	writeXML(rq.w, http.StatusOK, toTagging(tags))
	return nil
}

func (s *Server) putBucketTagging(rq *request) error {
	tags, err := readTagging(rq.r)
	if err != nil {
		return err
	}
	if err := s.layer.PutBucketTagging(rq.ctx, rq.bucket, tags); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) deleteBucketTagging(rq *request) error {
	if err := s.layer.PutBucketTagging(rq.ctx, rq.bucket, nil); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

package s3

import (
	"context"
	"encoding/xml"
	"net/http"
	"strings"
	"time"

	"github.com/kelpfs/kelp/internal/objectapi"
)

// Bucket lifecycle configuration: the XML of PutBucketLifecycleConfiguration
// and GetBucketLifecycleConfiguration, and the background run of the rules
// (objectapi.ApplyLifecycle).

type lifecycleConfiguration struct {
	XMLName xml.Name           `xml:"LifecycleConfiguration"`
	Xmlns   string             `xml:"xmlns,attr,omitempty"`
	Rules   []lifecycleRuleXML `xml:"Rule"`
}

type lifecycleRuleXML struct {
	ID     string              `xml:"ID,omitempty"`
	Status string              `xml:"Status"`
	Prefix *string             `xml:"Prefix"` // the older form of Filter/Prefix
	Filter *lifecycleFilterXML `xml:"Filter"`

	Expiration                     *expirationXML      `xml:"Expiration"`
	NoncurrentVersionExpiration    *noncurrentXML      `xml:"NoncurrentVersionExpiration"`
	AbortIncompleteMultipartUpload *abortIncompleteXML `xml:"AbortIncompleteMultipartUpload"`

	// Storage classes do not exist here: refused, never ignored.
	Transitions           []struct{} `xml:"Transition"`
	NoncurrentTransitions []struct{} `xml:"NoncurrentVersionTransition"`
}

type expirationXML struct {
	Days                      int    `xml:"Days,omitempty"`
	Date                      string `xml:"Date,omitempty"`
	ExpiredObjectDeleteMarker *bool  `xml:"ExpiredObjectDeleteMarker,omitempty"`
}

type noncurrentXML struct {
	NoncurrentDays          int `xml:"NoncurrentDays"`
	NewerNoncurrentVersions int `xml:"NewerNoncurrentVersions,omitempty"`
}

type abortIncompleteXML struct {
	DaysAfterInitiation int `xml:"DaysAfterInitiation"`
}

type lifecycleFilterXML struct {
	Prefix                *string       `xml:"Prefix"`
	Tag                   *tagXML       `xml:"Tag"`
	ObjectSizeGreaterThan *int64        `xml:"ObjectSizeGreaterThan"`
	ObjectSizeLessThan    *int64        `xml:"ObjectSizeLessThan"`
	And                   *filterAndXML `xml:"And"`
}

type filterAndXML struct {
	Prefix                string   `xml:"Prefix,omitempty"`
	Tags                  []tagXML `xml:"Tag"`
	ObjectSizeGreaterThan int64    `xml:"ObjectSizeGreaterThan,omitempty"`
	ObjectSizeLessThan    int64    `xml:"ObjectSizeLessThan,omitempty"`
}

var errMalformedLifecycle = newErr("MalformedXML", http.StatusBadRequest,
	"The XML you provided was not well-formed or did not validate against our published schema")

func (s *Server) putBucketLifecycle(rq *request) error {
	var cfg lifecycleConfiguration
	if err := readXML(rq.r, &cfg); err != nil {
		return err
	}
	rules := make([]objectapi.LifecycleRule, len(cfg.Rules))
	for i := range cfg.Rules {
		r, err := ruleFromXML(&cfg.Rules[i])
		if err != nil {
			return err
		}
		rules[i] = r
	}
	if err := s.layer.PutBucketLifecycle(rq.ctx, rq.bucket, rules); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

func ruleFromXML(x *lifecycleRuleXML) (objectapi.LifecycleRule, error) {
	r := objectapi.LifecycleRule{ID: x.ID}
	switch x.Status {
	case "Enabled":
		r.Enabled = true
	case "Disabled":
	default:
		return r, errMalformedLifecycle
	}
	if len(x.Transitions) > 0 || len(x.NoncurrentTransitions) > 0 {
		return r, newErr("NotImplemented", http.StatusNotImplemented, "Kelp has one storage class: lifecycle transitions are not supported")
	}
	if x.Prefix != nil && x.Filter != nil {
		return r, errMalformedLifecycle
	}
	if x.Prefix != nil {
		r.Prefix = *x.Prefix
	}
	if f := x.Filter; f != nil {
		set := 0
		for _, present := range []bool{f.Prefix != nil, f.Tag != nil, f.ObjectSizeGreaterThan != nil, f.ObjectSizeLessThan != nil, f.And != nil} {
			if present {
				set++
			}
		}
		if set > 1 {
			return r, errMalformedLifecycle // several conditions go in And
		}
		switch {
		case f.Prefix != nil:
			r.Prefix = *f.Prefix
		case f.Tag != nil:
			r.Tags = []objectapi.Tag{{Key: f.Tag.Key, Value: f.Tag.Value}}
		case f.ObjectSizeGreaterThan != nil:
			r.SizeGreaterThan = *f.ObjectSizeGreaterThan
		case f.ObjectSizeLessThan != nil:
			r.SizeLessThan = *f.ObjectSizeLessThan
		case f.And != nil:
			r.Prefix, r.SizeGreaterThan, r.SizeLessThan = f.And.Prefix, f.And.ObjectSizeGreaterThan, f.And.ObjectSizeLessThan
			for _, t := range f.And.Tags {
				r.Tags = append(r.Tags, objectapi.Tag{Key: t.Key, Value: t.Value})
			}
		}
	}
	if e := x.Expiration; e != nil {
		r.ExpirationDays = e.Days
		if e.Date != "" {
			t, err := time.Parse(time.RFC3339, e.Date)
			if err != nil {
				if t, err = time.Parse("2006-01-02", e.Date); err != nil {
					return r, newErr("InvalidArgument", http.StatusBadRequest, "Invalid date: "+e.Date)
				}
			}
			r.ExpirationDate = t.UTC()
		}
		r.ExpiredObjectDeleteMarker = e.ExpiredObjectDeleteMarker != nil && *e.ExpiredObjectDeleteMarker
		if e.Days == 0 && e.Date == "" && e.ExpiredObjectDeleteMarker == nil {
			return r, errMalformedLifecycle
		}
	}
	if n := x.NoncurrentVersionExpiration; n != nil {
		if n.NoncurrentDays <= 0 {
			return r, newErr("InvalidArgument", http.StatusBadRequest, "'NoncurrentDays' in NoncurrentVersionExpiration action must be a positive integer")
		}
		r.NoncurrentDays, r.NewerNoncurrentVersions = n.NoncurrentDays, n.NewerNoncurrentVersions
	}
	if a := x.AbortIncompleteMultipartUpload; a != nil {
		if a.DaysAfterInitiation <= 0 {
			return r, newErr("InvalidArgument", http.StatusBadRequest, "'DaysAfterInitiation' in AbortIncompleteMultipartUpload action must be a positive integer")
		}
		r.AbortIncompleteDays = a.DaysAfterInitiation
	}
	return r, nil
}

func (s *Server) getBucketLifecycle(rq *request) error {
	rules, err := s.layer.GetBucketLifecycle(rq.ctx, rq.bucket)
	if err != nil {
		return err
	}
	out := lifecycleConfiguration{Xmlns: s3NS}
	for _, r := range rules {
		out.Rules = append(out.Rules, ruleToXML(r))
	}
	writeXML(rq.w, http.StatusOK, out)
	return nil
}

func ruleToXML(r objectapi.LifecycleRule) lifecycleRuleXML {
	x := lifecycleRuleXML{ID: r.ID, Status: "Disabled", Filter: &lifecycleFilterXML{}}
	if r.Enabled {
		x.Status = "Enabled"
	}
	conds := 0
	for _, c := range []bool{r.Prefix != "", r.SizeGreaterThan > 0, r.SizeLessThan > 0} {
		if c {
			conds++
		}
	}
	conds += len(r.Tags)
	f := x.Filter
	switch {
	case conds > 1:
		f.And = &filterAndXML{Prefix: r.Prefix, ObjectSizeGreaterThan: r.SizeGreaterThan, ObjectSizeLessThan: r.SizeLessThan}
		for _, t := range r.Tags {
			f.And.Tags = append(f.And.Tags, tagXML{t.Key, t.Value})
		}
	case len(r.Tags) == 1:
		f.Tag = &tagXML{r.Tags[0].Key, r.Tags[0].Value}
	case r.SizeGreaterThan > 0:
		f.ObjectSizeGreaterThan = &r.SizeGreaterThan
	case r.SizeLessThan > 0:
		f.ObjectSizeLessThan = &r.SizeLessThan
	default:
		f.Prefix = &r.Prefix
	}
	if r.ExpirationDays > 0 || !r.ExpirationDate.IsZero() || r.ExpiredObjectDeleteMarker {
		x.Expiration = &expirationXML{Days: r.ExpirationDays}
		if !r.ExpirationDate.IsZero() {
			x.Expiration.Date = r.ExpirationDate.UTC().Format("2006-01-02T15:04:05.000Z")
		}
		if r.ExpiredObjectDeleteMarker {
			t := true
			x.Expiration.ExpiredObjectDeleteMarker = &t
		}
	}
	if r.NoncurrentDays > 0 {
		x.NoncurrentVersionExpiration = &noncurrentXML{r.NoncurrentDays, r.NewerNoncurrentVersions}
	}
	if r.AbortIncompleteDays > 0 {
		x.AbortIncompleteMultipartUpload = &abortIncompleteXML{r.AbortIncompleteDays}
	}
	return x
}

func (s *Server) deleteBucketLifecycle(rq *request) error {
	if err := s.layer.DeleteBucketLifecycle(rq.ctx, rq.bucket); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

// lifecycleLoop applies the buckets' lifecycle rules a minute after the
// start (a gateway restarted more often than every interval still applies
// them) and then every interval.
func (s *Server) lifecycleLoop(ctx context.Context, every time.Duration) {
	t := time.NewTimer(min(time.Minute, every))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(every)
		st, err := s.layer.ApplyLifecycle(ctx, time.Now())
		if err != nil && ctx.Err() == nil {
			s.log.Warn("s3: applying lifecycle rules", "err", err)
		}
		if st != (objectapi.LifecycleStats{}) {
			s.log.Info("s3: lifecycle rules applied", "expired", st.Expired, "noncurrentDeleted", st.NoncurrentDeleted,
				"markersRemoved", st.MarkersRemoved, "uploadsAborted", st.UploadsAborted)
		}
	}
}

// setExpiration sets x-amz-expiration when a lifecycle rule of the bucket
// will expire oi, the current version of rq's object, as S3 does on PUT,
// GET and HEAD: expiry-date="<RFC 1123 date>", rule-id="<id>".
func (s *Server) setExpiration(rq *request, h http.Header, oi objectapi.ObjectInfo) {
	raw := s.loadAccess(rq, rq.bucket).lifecycle
	if len(raw) == 0 {
		return
	}
	rules, err := objectapi.DecodeLifecycle(raw)
	if err != nil {
		return
	}
	oi.Bucket, oi.Key = rq.bucket, rq.key
	at, id := s.layer.Expiration(rq.ctx, rules, oi)
	if at.IsZero() {
		return
	}
	h.Set("x-amz-expiration", `expiry-date="`+at.UTC().Format(http.TimeFormat)+`", rule-id="`+strings.ReplaceAll(id, `"`, `\"`)+`"`)
}

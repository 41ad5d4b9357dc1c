package s3

import (
	"context"
	"encoding/xml"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kelpfs/kelp/internal/objectapi"
)

// Object lock on the wire: the bucket's configuration (?object-lock),
// per-version retention (?retention) and legal hold (?legal-hold), the
// x-amz-object-lock-* headers of writes and reads, and the bypass of
// GOVERNANCE retention. objectapi enforces the locks (objectlock.go).

// opBypassGovernance is the permission a bypass of GOVERNANCE retention is
// authorised as (policyAction makes it s3:BypassGovernanceRetention).
const opBypassGovernance = "BypassGovernanceRetention"

// mayBypassGovernance reports whether the requester holds
// s3:BypassGovernanceRetention on bucket/key. It is decided by authorize as
// one more IAM action needing Admin: the bucket's owner (full control of
// its bucket, within its Write), Admin identities and a bucket policy Allow
// have it, a policy Deny refuses it. Anonymous requests get it only from a
// policy (never from a public-read-write ACL).
func (s *Server) mayBypassGovernance(rq *request, key string) bool {
	return s.authorize(rq, opBypassGovernance, ActionAdmin, rq.bucket, key) == nil
}

// wantsBypass reports whether the request asks to bypass GOVERNANCE
// retention (x-amz-bypass-governance-retention: true).
func wantsBypass(r *http.Request) bool {
	return strings.EqualFold(strings.TrimSpace(r.Header.Get("x-amz-bypass-governance-retention")), "true")
}

// bypassContext returns the context for a delete or retention change of
// the given keys: with objectapi.WithGovernanceBypass when the request asks
// for the bypass and may have it on every key. Without the permission the
// request goes on without the bypass (a GOVERNANCE-locked version is then
// refused with AccessDenied, as S3 does).
func (s *Server) bypassContext(rq *request, keys ...string) context.Context {
	if !wantsBypass(rq.r) {
		return rq.ctx
	}
	for _, k := range keys {
		if !s.mayBypassGovernance(rq, k) {
			return rq.ctx
		}
	}
	return objectapi.WithGovernanceBypass(rq.ctx)
}

// objectLockHeaders reads the lock a write asks for: x-amz-object-lock-mode
// with x-amz-object-lock-retain-until-date (both or neither), and
// x-amz-object-lock-legal-hold ON or OFF.
func objectLockHeaders(h http.Header) (objectapi.ObjectLock, error) {
	var lk objectapi.ObjectLock
	mode, until := h.Get("x-amz-object-lock-mode"), h.Get("x-amz-object-lock-retain-until-date")
	switch {
	case mode == "" && until == "":
	case mode == "" || until == "":
		return lk, &apiError{Code: "InvalidArgument", Status: http.StatusBadRequest,
			Message: "x-amz-object-lock-retain-until-date and x-amz-object-lock-mode must both be supplied"}
	case mode != objectapi.LockGovernance && mode != objectapi.LockCompliance:
		return lk, &apiError{Code: "InvalidArgument", Status: http.StatusBadRequest, Message: "Unknown wormMode directive."}
	default:
		t, err := parseLockDate(until)
		if err != nil {
			return lk, err
		}
		lk.Mode, lk.RetainUntil = mode, t
	}
	switch hold := h.Get("x-amz-object-lock-legal-hold"); hold {
	case "", "OFF":
	case "ON":
		lk.LegalHold = true
	default:
		return lk, &apiError{Code: "InvalidArgument", Status: http.StatusBadRequest, Message: "Legal Hold must be either of 'ON' or 'OFF'"}
	}
	return lk, nil
}

// parseLockDate reads an ISO 8601 date and time as S3 takes them.
func parseLockDate(v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(v))
	if err != nil {
		return t, &apiError{Code: "InvalidArgument", Status: http.StatusBadRequest,
			Message: "The retain until date must be provided in ISO 8601 format"}
	}
	return t.UTC(), nil
}

// checkLockDigest: S3 requires an integrity check on a PUT that carries
// object lock headers, Content-MD5 or an x-amz-checksum-* value (as a
// header or a trailer; the SDKs send one by default).
func checkLockDigest(r *http.Request, lk objectapi.ObjectLock) error {
	if lk.IsZero() || r.Header.Get("Content-MD5") != "" {
		return nil
	}
	if strings.HasPrefix(strings.ToLower(r.Header.Get("x-amz-trailer")), "x-amz-checksum-") {
		return nil
	}
	for _, alg := range objectapi.ChecksumAlgorithms() {
		if r.Header.Get("x-amz-checksum-"+strings.ToLower(alg)) != "" {
			return nil
		}
	}
	return &apiError{Code: "InvalidRequest", Status: http.StatusBadRequest,
		Message: "Content-MD5 OR x-amz-checksum- HTTP header is required for Put Object requests with Object Lock parameters"}
}

// lockConditionValues adds the object lock condition keys of a request's
// headers for bucket policies: s3:object-lock-mode,
// s3:object-lock-retain-until-date, s3:object-lock-legal-hold and
// s3:object-lock-remaining-retention-days (whole days from now to the
// retain-until date, rounded up).
func lockConditionValues(h http.Header, now time.Time, v objectapi.ConditionValues) {
	set := func(key, val string) {
		if val != "" {
			v[key] = []string{val}
		}
	}
	set("s3:object-lock-mode", h.Get("x-amz-object-lock-mode"))
	set("s3:object-lock-legal-hold", h.Get("x-amz-object-lock-legal-hold"))
	until := h.Get("x-amz-object-lock-retain-until-date")
	set("s3:object-lock-retain-until-date", until)
	if t, err := parseLockDate(until); err == nil && t.After(now) {
		days := (t.Sub(now) + 24*time.Hour - 1) / (24 * time.Hour)
		set("s3:object-lock-remaining-retention-days", strconv.FormatInt(int64(days), 10))
	}
}

// setLockHeaders sends a version's lock on GET and HEAD.
func setLockHeaders(h http.Header, lk objectapi.ObjectLock) {
	if lk.Mode != "" {
		h.Set("x-amz-object-lock-mode", lk.Mode)
		h.Set("x-amz-object-lock-retain-until-date", isoTime(lk.RetainUntil))
	}
	if lk.LegalHold {
		h.Set("x-amz-object-lock-legal-hold", "ON")
	}
}

// objectLockOnCreate turns object lock on for a bucket CreateBucket has
// just made, when the request asks for it. If that fails, the new (empty)
// bucket is removed again: a client retrying the creation must not find a
// bucket without the lock it asked for (BucketAlreadyOwnedByYou) and go on
// writing unprotected objects into it.
func (s *Server) objectLockOnCreate(rq *request) error {
	if !strings.EqualFold(strings.TrimSpace(rq.r.Header.Get("x-amz-bucket-object-lock-enabled")), "true") {
		return nil
	}
	err := s.layer.EnableObjectLock(rq.ctx, rq.bucket)
	if err != nil {
		if derr := s.layer.DeleteBucket(context.WithoutCancel(rq.ctx), rq.bucket); derr != nil {
			s.log.Error("s3: a bucket created without the object lock it asked for could not be removed", "bucket", rq.bucket, "err", derr)
		}
	}
	return err
}

type objectLockConfiguration struct {
	XMLName           xml.Name        `xml:"ObjectLockConfiguration"`
	Xmlns             string          `xml:"xmlns,attr,omitempty"`
	ObjectLockEnabled string          `xml:",omitempty"`
	Rule              *objectLockRule `xml:",omitempty"`
}

type objectLockRule struct {
	DefaultRetention defaultRetention
}

type defaultRetention struct {
	Mode  string `xml:",omitempty"`
	Days  int    `xml:",omitempty"`
	Years int    `xml:",omitempty"`
}

func (s *Server) getObjectLockConfiguration(rq *request) error {
	c, err := s.layer.GetObjectLockConfig(rq.ctx, rq.bucket)
	if err != nil {
		return err
	}
	out := objectLockConfiguration{Xmlns: s3NS, ObjectLockEnabled: "Enabled"}
	if c.Mode != "" {
		out.Rule = &objectLockRule{DefaultRetention: defaultRetention{Mode: c.Mode, Days: c.Days, Years: c.Years}}
	}
	writeXML(rq.w, http.StatusOK, out)
	return nil
}

func (s *Server) putObjectLockConfiguration(rq *request) error {
	var in objectLockConfiguration
	if err := readXML(rq.r, &in); err != nil {
		return err
	}
	c := objectapi.ObjectLockConfig{Enabled: in.ObjectLockEnabled == "Enabled"}
	if in.Rule != nil {
		d := in.Rule.DefaultRetention
		c.Mode, c.Days, c.Years = d.Mode, d.Days, d.Years
		if c.Mode == "" && c.Days == 0 && c.Years == 0 {
			return errMalformedXML // a Rule needs a default retention
		}
	}
	if err := s.layer.PutObjectLockConfig(rq.ctx, rq.bucket, c); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

type retentionXML struct {
	XMLName         xml.Name `xml:"Retention"`
	Xmlns           string   `xml:"xmlns,attr,omitempty"`
	Mode            string   `xml:",omitempty"`
	RetainUntilDate string   `xml:",omitempty"`
}

func (s *Server) getObjectRetention(rq *request) error {
	lk, err := s.layer.GetObjectLock(rq.ctx, rq.bucket, rq.key, rq.q.Get("versionId"))
	if err != nil {
		return err
	}
	if lk.Mode == "" {
		return errNoObjectRetention
	}
	writeXML(rq.w, http.StatusOK, retentionXML{Xmlns: s3NS, Mode: lk.Mode, RetainUntilDate: isoTime(lk.RetainUntil)})
	return nil
}

// putObjectRetention sets a version's retention; an empty Retention
// removes it (which an active retention allows only to a GOVERNANCE
// bypass).
func (s *Server) putObjectRetention(rq *request) error {
	var in retentionXML
	if err := readXML(rq.r, &in); err != nil {
		return err
	}
	var until time.Time
	switch {
	case in.Mode == "" && in.RetainUntilDate == "":
	case in.Mode != objectapi.LockGovernance && in.Mode != objectapi.LockCompliance, in.RetainUntilDate == "":
		return errMalformedXML
	default:
		t, err := parseLockDate(in.RetainUntilDate)
		if err != nil {
			return err
		}
		until = t
	}
	ctx := s.bypassContext(rq, rq.key)
	if err := s.layer.PutObjectRetention(ctx, rq.bucket, rq.key, rq.q.Get("versionId"), in.Mode, until); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

type legalHoldXML struct {
	XMLName xml.Name `xml:"LegalHold"`
	Xmlns   string   `xml:"xmlns,attr,omitempty"`
	Status  string
}

// getObjectLegalHold answers OFF for a version never put under a hold.
func (s *Server) getObjectLegalHold(rq *request) error {
	lk, err := s.layer.GetObjectLock(rq.ctx, rq.bucket, rq.key, rq.q.Get("versionId"))
	if err != nil {
		return err
	}
	st := "OFF"
	if lk.LegalHold {
		st = "ON"
	}
	writeXML(rq.w, http.StatusOK, legalHoldXML{Xmlns: s3NS, Status: st})
	return nil
}

func (s *Server) putObjectLegalHold(rq *request) error {
	var in legalHoldXML
	if err := readXML(rq.r, &in); err != nil {
		return err
	}
	if in.Status != "ON" && in.Status != "OFF" {
		return errMalformedXML
	}
	if err := s.layer.PutObjectLegalHold(rq.ctx, rq.bucket, rq.key, rq.q.Get("versionId"), in.Status == "ON"); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

var errNoObjectRetention = newErr("NoSuchObjectLockConfiguration", http.StatusNotFound, "The specified object does not have a ObjectLock configuration")

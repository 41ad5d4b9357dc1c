package s3

import (
	"encoding/xml"
	"net/http"
	"strconv"
	"strings"

	"github.com/kelpfs/kelp/internal/objectapi"
)

type corsConfiguration struct {
	XMLName xml.Name  `xml:"CORSConfiguration"`
	Xmlns   string    `xml:"xmlns,attr,omitempty"`
	Rules   []corsXML `xml:"CORSRule"`
}

type corsXML struct {
	ID             string   `xml:"ID,omitempty"`
	AllowedOrigins []string `xml:"AllowedOrigin"`
	AllowedMethods []string `xml:"AllowedMethod"`
	AllowedHeaders []string `xml:"AllowedHeader"`
	ExposeHeaders  []string `xml:"ExposeHeader"`
	MaxAgeSeconds  *int     `xml:"MaxAgeSeconds,omitempty"`
}

func (s *Server) getBucketCORS(rq *request) error {
	rules, err := s.layer.GetBucketCORS(rq.ctx, rq.bucket)
	if err != nil {
		return err
	}
	out := corsConfiguration{Xmlns: s3NS}
	for _, r := range rules {
		x := corsXML{ID: r.ID, AllowedOrigins: r.AllowedOrigins, AllowedMethods: r.AllowedMethods,
			AllowedHeaders: r.AllowedHeaders, ExposeHeaders: r.ExposeHeaders}
		if r.MaxAgeSeconds > 0 {
			m := r.MaxAgeSeconds
			x.MaxAgeSeconds = &m
		}
		out.Rules = append(out.Rules, x)
	}
	writeXML(rq.w, http.StatusOK, out)
	return nil
}

func (s *Server) putBucketCORS(rq *request) error {
	var cfg corsConfiguration
	if err := readXML(rq.r, &cfg); err != nil {
		return err
	}
	rules := make([]objectapi.CORSRule, len(cfg.Rules))
	for i, x := range cfg.Rules {
		rules[i] = objectapi.CORSRule{ID: x.ID, AllowedOrigins: x.AllowedOrigins, AllowedMethods: x.AllowedMethods,
			AllowedHeaders: x.AllowedHeaders, ExposeHeaders: x.ExposeHeaders}
		if x.MaxAgeSeconds != nil {
			rules[i].MaxAgeSeconds = *x.MaxAgeSeconds
		}
	}
	if err := s.layer.PutBucketCORS(rq.ctx, rq.bucket, rules); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) deleteBucketCORS(rq *request) error {
	if err := s.layer.DeleteBucketCORS(rq.ctx, rq.bucket); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

// preflight answers a CORS OPTIONS request from the bucket's rules; it
// needs no signature, as browsers send none.
func (s *Server) preflight(rq *request) error {
	h := rq.r.Header
	origin, method := h.Get("Origin"), h.Get("Access-Control-Request-Method")
	if rq.bucket == "" || origin == "" || method == "" {
		return errBadPreflight
	}
	rules, err := s.layer.GetBucketCORS(rq.ctx, rq.bucket)
	if err != nil {
		return errCORSNotEnabled
	}
	var reqHeaders []string
	if v := h.Get("Access-Control-Request-Headers"); v != "" {
		reqHeaders = strings.Split(v, ",")
	}
	rule, ok := objectapi.MatchCORS(rules, origin, method, reqHeaders)
	if !ok {
		return errCORSNotAllowed
	}
	w := rq.w.Header()
	setCORS(w, rule, origin)
	if v := h.Get("Access-Control-Request-Headers"); v != "" {
		w.Set("Access-Control-Allow-Headers", v)
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

// setCORS sets the headers S3 sends for a rule that matched, on
// preflights and ordinary requests alike.
func setCORS(w http.Header, rule objectapi.CORSRule, origin string) {
	allow := origin
	for _, o := range rule.AllowedOrigins {
		if o == "*" {
			allow = "*"
		}
	}
	w.Set("Access-Control-Allow-Origin", allow)
	if allow != "*" {
		w.Set("Access-Control-Allow-Credentials", "true")
	}
	w.Add("Vary", "Origin, Access-Control-Request-Headers, Access-Control-Request-Method")
	w.Set("Access-Control-Allow-Methods", strings.Join(rule.AllowedMethods, ", "))
	if len(rule.ExposeHeaders) > 0 {
		w.Set("Access-Control-Expose-Headers", strings.Join(rule.ExposeHeaders, ", "))
	}
	if rule.MaxAgeSeconds > 0 {
		w.Set("Access-Control-Max-Age", strconv.Itoa(rule.MaxAgeSeconds))
	}
}

// corsHeaders adds the CORS response headers of a matching rule to an
// ordinary request that carries Origin, before the request is authorised,
// so that a browser can also read the error of a refused request.
func (s *Server) corsHeaders(rq *request) {
	rules, err := s.layer.GetBucketCORS(rq.ctx, rq.bucket)
	if err != nil {
		return
	}
	if rule, ok := objectapi.MatchCORS(rules, rq.r.Header.Get("Origin"), rq.r.Method, nil); ok {
		setCORS(rq.w.Header(), rule, rq.r.Header.Get("Origin"))
	}
}

package s3

import (
	"encoding/xml"
	"net/http"

	"github.com/kelpfs/kelp/internal/objectapi"
)

// Default bucket encryption: PutBucketEncryption, GetBucketEncryption,
// DeleteBucketEncryption. The rule is applied by encryptionFor to writes
// without SSE headers of their own.

type sseConfiguration struct {
	XMLName xml.Name  `xml:"ServerSideEncryptionConfiguration"`
	Xmlns   string    `xml:"xmlns,attr,omitempty"`
	Rules   []sseRule `xml:"Rule"`
}

type sseRule struct {
	Default *struct {
		SSEAlgorithm   string
		KMSMasterKeyID string `xml:",omitempty"`
	} `xml:"ApplyServerSideEncryptionByDefault"`
	BucketKeyEnabled *bool `xml:",omitempty"`
	// Blocked lists encryption types refused in the bucket; only NONE
	// (nothing blocked) is supported, anything else is refused rather
	// than ignored.
	Blocked *struct {
		Types []string `xml:"EncryptionType"`
	} `xml:"BlockedEncryptionTypes,omitempty"`
}

func (s *Server) putBucketEncryption(rq *request) error {
	var cfg sseConfiguration
	if err := readXML(rq.r, &cfg); err != nil {
		return err
	}
	if len(cfg.Rules) != 1 || cfg.Rules[0].Default == nil {
		return errMalformedXML
	}
	r := cfg.Rules[0]
	if r.Blocked != nil {
		for _, t := range r.Blocked.Types {
			if t != "NONE" {
				return &apiError{Code: "NotImplemented", Status: http.StatusNotImplemented, Message: "BlockedEncryptionTypes other than NONE are not supported"}
			}
		}
	}
	enc := objectapi.BucketEncryption{Algorithm: r.Default.SSEAlgorithm, KMSKeyID: r.Default.KMSMasterKeyID,
		BucketKey: r.BucketKeyEnabled != nil && *r.BucketKeyEnabled}
	switch enc.Algorithm {
	case "AES256", "aws:kms":
	case "aws:kms:dsse":
		enc.Algorithm = "aws:kms"
	default:
		return errMalformedXML
	}
	if enc.KMSKeyID != "" && enc.Algorithm != "aws:kms" {
		return &apiError{Code: "InvalidArgument", Status: http.StatusBadRequest, Message: "a KMSMasterKeyID is only allowed with SSEAlgorithm aws:kms"}
	}
	if s.cfg.KMS == nil {
		return errNoKMS
	}
	if enc.KMSKeyID != "" {
		if _, err := s.cfg.KMS.Describe(enc.KMSKeyID); err != nil {
			return kmsError(err)
		}
	}
	if err := s.layer.PutBucketEncryption(rq.ctx, rq.bucket, enc); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) getBucketEncryption(rq *request) error {
	enc, err := s.layer.GetBucketEncryption(rq.ctx, rq.bucket)
	if err != nil {
		return err
	}
	if enc == nil {
		return errNoSuchEncryption
	}
	r := sseRule{BucketKeyEnabled: &enc.BucketKey}
	r.Default = &struct {
		SSEAlgorithm   string
		KMSMasterKeyID string `xml:",omitempty"`
	}{enc.Algorithm, enc.KMSKeyID}
	writeXML(rq.w, http.StatusOK, sseConfiguration{Xmlns: s3NS, Rules: []sseRule{r}})
	return nil
}

func (s *Server) deleteBucketEncryption(rq *request) error {
	if err := s.layer.DeleteBucketEncryption(rq.ctx, rq.bucket); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

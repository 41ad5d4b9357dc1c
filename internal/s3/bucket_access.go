package s3

import (
	"encoding/xml"
	"net/http"

	"github.com/kelpfs/kelp/internal/objectapi"
)

// Bucket settings of access: object ownership controls, the public access
// block and the policy status.

type ownershipControls struct {
	XMLName xml.Name `xml:"OwnershipControls"`
	Xmlns   string   `xml:"xmlns,attr,omitempty"`
	Rules   []struct {
		ObjectOwnership string
	} `xml:"Rule"`
}

func (s *Server) getOwnershipControls(rq *request) error {
	b, err := s.layer.GetBucket(rq.ctx, rq.bucket)
	if err != nil {
		return err
	}
	if b.Ownership == "" {
		return errNoOwnershipControls
	}
	out := ownershipControls{Xmlns: s3NS}
	out.Rules = append(out.Rules, struct{ ObjectOwnership string }{b.Ownership})
	writeXML(rq.w, http.StatusOK, out)
	return nil
}

// putOwnershipControls sets the one rule. BucketOwnerEnforced needs a
// bucket ACL that grants nobody but the owner, as in S3.
func (s *Server) putOwnershipControls(rq *request) error {
	var in ownershipControls
	if err := readXML(rq.r, &in); err != nil {
		return err
	}
	if len(in.Rules) != 1 || !objectapi.ValidOwnership(in.Rules[0].ObjectOwnership) {
		return errMalformedXML
	}
	oo := in.Rules[0].ObjectOwnership
	if oo == objectapi.OwnershipBucketOwnerEnforced {
		b, err := s.layer.GetBucket(rq.ctx, rq.bucket)
		if err != nil {
			return err
		}
		for _, g := range objectapi.EffectiveGrants(b.ACL, b.Grants, b.Owner, b.Owner) {
			if g.Type != objectapi.GranteeCanonicalUser || g.ID != b.Owner {
				return errBucketACLOwnership
			}
		}
	}
	if err := s.layer.SetBucketOwnership(rq.ctx, rq.bucket, oo); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) deleteOwnershipControls(rq *request) error {
	if err := s.layer.SetBucketOwnership(rq.ctx, rq.bucket, ""); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

type publicAccessBlockXML struct {
	XMLName               xml.Name `xml:"PublicAccessBlockConfiguration"`
	Xmlns                 string   `xml:"xmlns,attr,omitempty"`
	BlockPublicAcls       bool
	IgnorePublicAcls      bool
	BlockPublicPolicy     bool
	RestrictPublicBuckets bool
}

func (s *Server) getPublicAccessBlock(rq *request) error {
	b, err := s.layer.GetBucket(rq.ctx, rq.bucket)
	if err != nil {
		return err
	}
	p := b.PublicAccessBlock
	if p == nil {
		return errNoPublicAccessBlock
	}
	writeXML(rq.w, http.StatusOK, publicAccessBlockXML{Xmlns: s3NS, BlockPublicAcls: p.BlockPublicAcls,
		IgnorePublicAcls: p.IgnorePublicAcls, BlockPublicPolicy: p.BlockPublicPolicy, RestrictPublicBuckets: p.RestrictPublicBuckets})
	return nil
}

func (s *Server) putPublicAccessBlock(rq *request) error {
	var in publicAccessBlockXML
	if err := readXML(rq.r, &in); err != nil {
		return err
	}
	err := s.layer.SetPublicAccessBlock(rq.ctx, rq.bucket, &objectapi.PublicAccessBlock{BlockPublicAcls: in.BlockPublicAcls,
		IgnorePublicAcls: in.IgnorePublicAcls, BlockPublicPolicy: in.BlockPublicPolicy, RestrictPublicBuckets: in.RestrictPublicBuckets})
	if err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) deletePublicAccessBlock(rq *request) error {
	if err := s.layer.SetPublicAccessBlock(rq.ctx, rq.bucket, nil); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

type policyStatus struct {
	XMLName  xml.Name `xml:"PolicyStatus"`
	Xmlns    string   `xml:"xmlns,attr"`
	IsPublic bool
}

// getPolicyStatus tells whether the bucket's policy is public (see
// objectapi.Policy.IsPublic); a bucket without one is NoSuchBucketPolicy.
func (s *Server) getPolicyStatus(rq *request) error {
	doc, err := s.layer.GetBucketPolicy(rq.ctx, rq.bucket)
	if err != nil {
		return err
	}
	p, err := s.parsedPolicy(rq.bucket, doc)
	if err != nil {
		return err
	}
	writeXML(rq.w, http.StatusOK, policyStatus{Xmlns: s3NS, IsPublic: p.IsPublic()})
	return nil
}

// checkPolicyBlocked refuses a public policy on a bucket that blocks
// them (BlockPublicPolicy), as S3 does with AccessDenied.
func (s *Server) checkPolicyBlocked(rq *request, doc []byte) error {
	a := s.loadAccess(rq, rq.bucket)
	if a.pab == nil || !a.pab.BlockPublicPolicy {
		return nil
	}
	p, err := objectapi.ParsePolicy(rq.bucket, doc)
	if err != nil {
		return err
	}
	if p.IsPublic() {
		return errPublicBlocked
	}
	return nil
}

package s3

import (
	"bytes"
	"encoding/xml"
	"io"
	"net/http"
	"strings"

	"github.com/kelpfs/kelp/internal/objectapi"
)

// ACLs on the wire: canned ACLs (x-amz-acl), grant headers
// (x-amz-grant-read: id="...", emailAddress="...", uri="...") and
// AccessControlPolicy documents, for buckets and objects.

type accessControlPolicy struct {
	XMLName xml.Name `xml:"AccessControlPolicy"`
	Xmlns   string   `xml:"xmlns,attr"`
	Owner   owner
	Grants  []grant `xml:"AccessControlList>Grant"`
}

type grant struct {
	Grantee    grantee
	Permission string
}

type grantee struct {
	XMLNS        string `xml:"xmlns:xsi,attr"`
	Type         string `xml:"xsi:type,attr"`
	ID           string `xml:",omitempty"`
	DisplayName  string `xml:",omitempty"`
	EmailAddress string `xml:",omitempty"`
	URI          string `xml:",omitempty"`
}

// accessControlPolicyIn is the document as clients send it (the xsi:type
// attribute is matched by its local name).
type accessControlPolicyIn struct {
	XMLName xml.Name `xml:"AccessControlPolicy"`
	Owner   *owner
	Grants  []struct {
		Grantee *struct {
			Type         string `xml:"type,attr"`
			ID           string
			EmailAddress string
			URI          string
		}
		Permission string
	} `xml:"AccessControlList>Grant"`
}

const xsiNS = "http://www.w3.org/2001/XMLSchema-instance"

// maxGrants is S3's limit on the grants of one ACL.
const maxGrants = 100

var errMalformedACL = newErr("MalformedACLError", http.StatusBadRequest, "The XML you provided was not well-formed or did not validate against our published schema.")

// aclDocument renders grants for GetBucketAcl / GetObjectAcl.
func (s *Server) aclDocument(ownerID string, grants []objectapi.Grant) accessControlPolicy {
	p := accessControlPolicy{Xmlns: s3NS, Owner: s.ownerOf(ownerID), Grants: []grant{}}
	for _, g := range grants {
		ge := grantee{XMLNS: xsiNS, Type: g.Type, URI: g.URI}
		if g.Type == objectapi.GranteeCanonicalUser {
			o := s.ownerOf(g.ID)
			ge.ID, ge.DisplayName = o.ID, o.DisplayName
		}
		p.Grants = append(p.Grants, grant{Grantee: ge, Permission: g.Permission})
	}
	return p
}

// grantHeaders maps the grant headers to their permissions.
var grantHeaders = []struct{ header, perm string }{
	{"x-amz-grant-read", objectapi.PermRead},
	{"x-amz-grant-write", objectapi.PermWrite},
	{"x-amz-grant-read-acp", objectapi.PermReadACP},
	{"x-amz-grant-write-acp", objectapi.PermWriteACP},
	{"x-amz-grant-full-control", objectapi.PermFullControl},
}

// requestACL reads the ACL a request sets with headers: x-amz-acl, or
// x-amz-grant-* (not both, as in S3). Neither is Access{} (private).
func (s *Server) requestACL(h http.Header, forBucket bool) (objectapi.Access, error) {
	var a objectapi.Access
	canned := h.Get("x-amz-acl")
	for _, gh := range grantHeaders {
		for _, v := range h.Values(gh.header) {
			gs, err := s.parseGrantHeader(v, gh.perm)
			if err != nil {
				return a, err
			}
			if a.Grants == nil {
				a.Grants = []objectapi.Grant{}
			}
			a.Grants = append(a.Grants, gs...)
		}
	}
	switch {
	case canned != "" && a.Grants != nil:
		return a, &apiError{Code: "InvalidRequest", Status: 400, Message: "Specifying both Canned ACLs and Header Grants is not allowed"}
	case len(a.Grants) > maxGrants:
		return a, errMalformedACL
	case canned != "" && !(objectapi.ValidACL(canned) || forBucket && canned == objectapi.ACLLogDeliveryWrite):
		return a, &apiError{Code: "InvalidArgument", Status: 400, Message: "Invalid canned ACL \"" + canned + "\""}
	}
	a.Canned = canned
	return a, nil
}

// parseGrantHeader reads one grant header value: a comma-separated list
// of grantees, each id=, emailAddress= or uri= with the value quoted or not.
func (s *Server) parseGrantHeader(v, perm string) ([]objectapi.Grant, error) {
	var out []objectapi.Grant
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, val, ok := strings.Cut(item, "=")
		if !ok {
			return nil, &apiError{Code: "InvalidArgument", Status: 400, Message: "Invalid grant " + item + " (want id=, emailAddress= or uri=)"}
		}
		val = strings.Trim(strings.TrimSpace(val), `"`)
		g, err := s.resolveGrantee(strings.ToLower(strings.TrimSpace(k)), val)
		if err != nil {
			return nil, err
		}
		g.Permission = perm
		out = append(out, g)
	}
	if out == nil {
		return nil, &apiError{Code: "InvalidArgument", Status: 400, Message: "Empty grant header"}
	}
	return out, nil
}

// resolveGrantee turns a grantee given by kind ("id", "emailaddress" or
// "uri") into a stored grant: e-mail addresses become canonical ids; ids
// must be known accounts and URIs known groups.
func (s *Server) resolveGrantee(kind, v string) (objectapi.Grant, error) {
	ids := s.ids.Load()
	switch kind {
	case "id":
		if ids.byID[v] == nil {
			return objectapi.Grant{}, &apiError{Code: "InvalidArgument", Status: 400, Message: "Invalid id: " + v}
		}
		return objectapi.Grant{Type: objectapi.GranteeCanonicalUser, ID: v}, nil
	case "emailaddress":
		id := ids.byEmail[strings.ToLower(v)]
		if id == nil {
			return objectapi.Grant{}, &apiError{Code: "UnresolvableGrantByEmailAddress", Status: 400,
				Message: "The e-mail address you provided does not match any account on record."}
		}
		return objectapi.Grant{Type: objectapi.GranteeCanonicalUser, ID: id.CanonicalID}, nil
	case "uri":
		if !objectapi.ValidGroup(v) {
			return objectapi.Grant{}, &apiError{Code: "InvalidArgument", Status: 400, Message: "Invalid group uri: " + v}
		}
		return objectapi.Grant{Type: objectapi.GranteeGroup, URI: v}, nil
	}
	return objectapi.Grant{}, &apiError{Code: "InvalidArgument", Status: 400, Message: "Invalid grantee type " + kind + " (want id, emailAddress or uri)"}
}

// parseACLDocument reads an AccessControlPolicy body; its Owner, when
// given, must be the resource's owner.
func (s *Server) parseACLDocument(body []byte, ownerID string) ([]objectapi.Grant, error) {
	var doc accessControlPolicyIn
	if err := xml.Unmarshal(body, &doc); err != nil {
		return nil, errMalformedACL
	}
	if doc.Owner != nil && doc.Owner.ID != "" && doc.Owner.ID != ownerID {
		return nil, &apiError{Code: "AccessDenied", Status: http.StatusForbidden, Message: "The Owner of an ACL cannot be changed"}
	}
	if len(doc.Grants) > maxGrants {
		return nil, errMalformedACL
	}
	out := []objectapi.Grant{}
	for _, g := range doc.Grants {
		if g.Grantee == nil || !objectapi.ValidPermission(g.Permission) {
			return nil, errMalformedACL
		}
		var kind, v string
		switch g.Grantee.Type {
		case "CanonicalUser":
			kind, v = "id", g.Grantee.ID
		case "AmazonCustomerByEmail":
			kind, v = "emailaddress", g.Grantee.EmailAddress
		case "Group":
			kind, v = "uri", g.Grantee.URI
		default:
			return nil, errMalformedACL
		}
		gr, err := s.resolveGrantee(kind, strings.TrimSpace(v))
		if err != nil {
			return nil, err
		}
		gr.Permission = g.Permission
		out = append(out, gr)
	}
	return out, nil
}

// aclOfPut reads the ACL a PutBucketAcl / PutObjectAcl sets: headers or a
// document, not both.
func (s *Server) aclOfPut(rq *request, ownerID string, forBucket bool) (objectapi.Access, error) {
	body, err := io.ReadAll(io.LimitReader(rq.r.Body, maxXMLBody+1))
	if err != nil {
		return objectapi.Access{}, err
	}
	if len(body) > maxXMLBody {
		return objectapi.Access{}, errMalformedACL
	}
	a, err := s.requestACL(rq.r.Header, forBucket)
	if err != nil {
		return a, err
	}
	body = bytes.TrimSpace(body)
	switch {
	case len(body) > 0 && (a.Canned != "" || a.Grants != nil):
		return a, &apiError{Code: "UnexpectedContent", Status: 400, Message: "This request does not support content when an ACL is given in headers"}
	case len(body) > 0:
		a.Grants, err = s.parseACLDocument(body, ownerID)
		return a, err
	case a.Canned == "" && a.Grants == nil:
		return a, &apiError{Code: "MissingRequestBodyError", Status: 400, Message: "Request Body is empty: give x-amz-acl, x-amz-grant-* or an AccessControlPolicy document"}
	}
	return a, nil
}

func (s *Server) getBucketACL(rq *request) error {
	b, err := s.layer.GetBucket(rq.ctx, rq.bucket)
	if err != nil {
		return err
	}
	writeXML(rq.w, http.StatusOK, s.aclDocument(b.Owner, objectapi.EffectiveGrants(b.ACL, b.Grants, b.Owner, b.Owner)))
	return nil
}

// putBucketACL sets a canned ACL, grant headers or an ACL document.
func (s *Server) putBucketACL(rq *request) error {
	b, err := s.layer.GetBucket(rq.ctx, rq.bucket)
	if err != nil {
		return err
	}
	acc, err := s.aclOfPut(rq, b.Owner, true)
	if err != nil {
		return err
	}
	if err := s.loadAccess(rq, rq.bucket).checkNewACL(acc); err != nil {
		return err
	}
	if err := s.layer.SetBucketAccess(rq.ctx, rq.bucket, acc); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) getObjectACL(rq *request) error {
	o, err := s.layer.GetObject(rq.ctx, rq.bucket, rq.key, objectapi.GetOptions{NoBody: true, VersionID: rq.q.Get("versionId")})
	if err != nil {
		return err
	}
	a := s.loadAccess(rq, rq.bucket)
	owner := a.objectOwner(o.Info.Owner)
	setVersionID(rq.w.Header(), o.Info.VersionID)
	writeXML(rq.w, http.StatusOK, s.aclDocument(owner, objectapi.EffectiveGrants(o.Info.ACL, o.Info.Grants, owner, a.owner)))
	return nil
}

// putObjectACL sets a canned ACL, grant headers or an ACL document on an
// object's version.
func (s *Server) putObjectACL(rq *request) error {
	vid := rq.q.Get("versionId")
	o, err := s.layer.GetObject(rq.ctx, rq.bucket, rq.key, objectapi.GetOptions{NoBody: true, VersionID: vid})
	if err != nil {
		return err
	}
	a := s.loadAccess(rq, rq.bucket)
	acc, err := s.aclOfPut(rq, a.objectOwner(o.Info.Owner), false)
	if err != nil {
		return err
	}
	if err := a.checkNewACL(acc); err != nil {
		return err
	}
	if err := s.layer.SetObjectAccess(rq.ctx, rq.bucket, rq.key, vid, acc); err != nil {
		return err
	}
	setVersionID(rq.w.Header(), o.Info.VersionID)
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

package s3

import (
	"encoding/xml"
	"net/http"
	"net/url"
)

// Bucket configurations Kelp does not have: server access logging, event
// notifications, requester pays, transfer acceleration, replication between
// buckets, and the analytics, inventory, metrics and Intelligent-Tiering
// reports. Reading one answers what S3 answers for a bucket that has none
// configured (an empty document, or the configuration's own 404), because
// that is this bucket's true state: tools that read every bucket setting
// (Terraform's aws_s3_bucket, backup and sync tools, consoles) then work.
// Writing one that would turn the feature on is 501 NotImplemented, never
// accepted and ignored; writing the state the bucket already has (logging
// off, no notifications, the owner pays, acceleration suspended) and
// deleting a configuration that does not exist succeed, as on S3.

var (
	errNoSuchReplication = newErr("ReplicationConfigurationNotFoundError", http.StatusNotFound, "The replication configuration was not found")
	errNoSuchConfig      = newErr("NoSuchConfiguration", http.StatusNotFound, "The specified configuration does not exist.")
)

// absentReport is one of the bucket reports, which S3 keeps by id: a GET
// with an id is that configuration (none here), one without lists them (an
// empty list, under the element S3 names it).
type absentReport struct {
	query    string // the sub-resource
	name     string // the S3 operation name without Get/List/Delete and "Bucket"
	listRoot string
}

var absentReports = []absentReport{
	{"analytics", "AnalyticsConfiguration", "ListBucketAnalyticsConfigurationResult"},
	{"inventory", "InventoryConfiguration", "ListInventoryConfigurationsResult"},
	{"metrics", "MetricsConfiguration", "ListMetricsConfigurationsResult"},
	{"intelligent-tiering", "IntelligentTieringConfiguration", "ListBucketIntelligentTieringConfigurationsOutput"},
}

// routeAbsent is the operation of a request for one of these
// configurations, nil when the request is for something else.
func routeAbsent(m string, q url.Values) *operation {
	switch m {
	case http.MethodGet:
		return getAbsent(q)
	case http.MethodPut:
		return putAbsent(q)
	case http.MethodDelete:
		return deleteAbsent(q)
	}
	return nil
}

func getAbsent(q url.Values) *operation {
	doc := func(v any) func(*Server, *request) error {
		return func(s *Server, rq *request) error { return s.answerAbsent(rq, v) }
	}
	switch {
	case has(q, "logging"):
		return &operation{name: "GetBucketLogging", action: ActionList, fn: doc(loggingStatus{Xmlns: s3NS})}
	case has(q, "notification"):
		return &operation{name: "GetBucketNotificationConfiguration", action: ActionList, fn: doc(notificationConfiguration{Xmlns: s3NS})}
	case has(q, "requestPayment"):
		return &operation{name: "GetBucketRequestPayment", action: ActionList, fn: doc(requestPayment{Xmlns: s3NS, Payer: payerOwner})}
	case has(q, "accelerate"):
		return &operation{name: "GetBucketAccelerateConfiguration", action: ActionList, fn: doc(accelerateConfiguration{Xmlns: s3NS})}
	case has(q, "replication"):
		return &operation{name: "GetBucketReplication", action: ActionList, fn: absentErr(errNoSuchReplication)}
	}
	for _, r := range absentReports {
		if !has(q, r.query) {
			continue
		}
		if has(q, "id") {
			return &operation{name: "GetBucket" + r.name, action: ActionList, fn: absentErr(errNoSuchConfig)}
		}
		return &operation{name: "ListBucket" + r.name + "s", action: ActionList,
			fn: doc(emptyList{XMLName: xml.Name{Local: r.listRoot}, Xmlns: s3NS})}
	}
	return nil
}

func putAbsent(q url.Values) *operation {
	switch {
	case has(q, "logging"):
		return &operation{name: "PutBucketLogging", action: ActionAdmin, fn: (*Server).putBucketLogging}
	case has(q, "notification"):
		return &operation{name: "PutBucketNotificationConfiguration", action: ActionAdmin, fn: (*Server).putBucketNotification}
	case has(q, "requestPayment"):
		return &operation{name: "PutBucketRequestPayment", action: ActionAdmin, fn: (*Server).putBucketRequestPayment}
	case has(q, "accelerate"):
		return &operation{name: "PutBucketAccelerateConfiguration", action: ActionAdmin, fn: (*Server).putBucketAccelerate}
	}
	return nil
}

func deleteAbsent(q url.Values) *operation {
	switch {
	case has(q, "replication"):
		return &operation{name: "DeleteBucketReplication", action: ActionAdmin, fn: (*Server).deleteAbsent}
	case has(q, "website"):
		return &operation{name: "DeleteBucketWebsite", action: ActionAdmin, fn: (*Server).deleteAbsent}
	}
	for _, r := range absentReports {
		if has(q, r.query) && has(q, "id") {
			return &operation{name: "DeleteBucket" + r.name, action: ActionAdmin, fn: absentErr(errNoSuchConfig)}
		}
	}
	return nil
}

// answerAbsent sends v, the document of a configuration the bucket does
// not have, once the bucket is known to exist.
func (s *Server) answerAbsent(rq *request, v any) error {
	if _, err := s.layer.GetBucket(rq.ctx, rq.bucket); err != nil {
		return err
	}
	writeXML(rq.w, http.StatusOK, v)
	return nil
}

// absentErr answers err for an existing bucket (NoSuchBucket otherwise).
func absentErr(err error) func(*Server, *request) error {
	return func(s *Server, rq *request) error {
		if _, gerr := s.layer.GetBucket(rq.ctx, rq.bucket); gerr != nil {
			return gerr
		}
		return err
	}
}

// deleteAbsent deletes a configuration no bucket has: 204, as S3 answers
// when there is nothing to delete.
func (s *Server) deleteAbsent(rq *request) error {
	if _, err := s.layer.GetBucket(rq.ctx, rq.bucket); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

// putAbsent reads a configuration document into v and answers 200 when
// check reports that it asks for the state the bucket already has; one that
// would turn on a feature Kelp does not have is 501, a document that is
// not one of S3's is MalformedXML.
func (s *Server) putAbsent(rq *request, v any, check func() (same, valid bool)) error {
	if _, err := s.layer.GetBucket(rq.ctx, rq.bucket); err != nil {
		return err
	}
	if err := readXML(rq.r, v); err != nil {
		return err
	}
	switch same, valid := check(); {
	case !valid:
		return errMalformedXML
	case !same:
		return errNotImplemented
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) putBucketLogging(rq *request) error {
	var v loggingStatus
	return s.putAbsent(rq, &v, func() (bool, bool) { return v.LoggingEnabled == nil, true })
}

func (s *Server) putBucketNotification(rq *request) error {
	var v notificationConfiguration
	return s.putAbsent(rq, &v, func() (bool, bool) { return len(v.Configs) == 0 && v.EventBridge == nil, true })
}

func (s *Server) putBucketRequestPayment(rq *request) error {
	var v requestPayment
	return s.putAbsent(rq, &v, func() (bool, bool) {
		return v.Payer == payerOwner, v.Payer == payerOwner || v.Payer == payerRequester
	})
}

func (s *Server) putBucketAccelerate(rq *request) error {
	var v accelerateConfiguration
	return s.putAbsent(rq, &v, func() (bool, bool) {
		return v.Status == "Suspended", v.Status == "Suspended" || v.Status == "Enabled"
	})
}

// The documents. Element names are S3's.

type loggingStatus struct {
	XMLName        xml.Name  `xml:"BucketLoggingStatus"`
	Xmlns          string    `xml:"xmlns,attr,omitempty"`
	LoggingEnabled *struct{} `xml:"LoggingEnabled"`
}

type notificationConfiguration struct {
	XMLName xml.Name `xml:"NotificationConfiguration"`
	Xmlns   string   `xml:"xmlns,attr,omitempty"`
	// Any topic, queue or Lambda function configuration asks for events.
	Configs     []struct{} `xml:",any"`
	EventBridge *struct{}  `xml:"EventBridgeConfiguration"`
}

const (
	payerOwner     = "BucketOwner"
	payerRequester = "Requester"
)

type requestPayment struct {
	XMLName xml.Name `xml:"RequestPaymentConfiguration"`
	Xmlns   string   `xml:"xmlns,attr,omitempty"`
	Payer   string
}

type accelerateConfiguration struct {
	XMLName xml.Name `xml:"AccelerateConfiguration"`
	Xmlns   string   `xml:"xmlns,attr,omitempty"`
	Status  string   `xml:",omitempty"`
}

type emptyList struct {
	XMLName     xml.Name
	Xmlns       string `xml:"xmlns,attr,omitempty"`
	IsTruncated bool
}

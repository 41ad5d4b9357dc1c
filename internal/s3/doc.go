// Package s3 is Kelp's S3 gateway: an HTTP server that speaks the Amazon
// S3 REST API over the object layer (internal/objectapi), so that the aws
// CLI, the AWS SDKs, rclone and s3cmd work with their default settings.
//
// It owns the routing of a request to an operation (router.go: method,
// path- or virtual-hosted-style bucket, key and sub-resource), the wire
// formats (XML documents and headers, one file per operation group:
// bucket.go, object_get.go, object_put.go, object_delete.go, list.go,
// multipart.go, tagging.go, cors.go), authentication and authorisation
// (auth.go, with signatures checked by sigv4) and errors.go, the one table
// from domain errors to S3 error codes. It holds no state of its own
// besides identities: buckets, objects and uploads are in the filer.
//
// Imported only by internal/cli (and tests). It defines no on-disk format;
// the identity file format is IdentityFile (JSON).
//
// # Requests
//
// Every request gets an x-amz-request-id (also in error bodies). Every
// request is authenticated by sigv4.Verifier (header or presigned SigV4,
// streaming payloads with chunk signatures and checksum trailers,
// Signature V2); the access key selects an Identity whose actions (Read,
// Write, List, Tagging, Admin, optionally per bucket) must allow the
// operation. A request with no signature is anonymous and is allowed only
// by the bucket's policy or by its canned ACL public-read (Read, List) or
// public-read-write (also Write). CORS preflights (OPTIONS) are answered
// from the bucket's CORS rules without authentication.
//
// # Bucket policies (policy.go; parsed and stored by objectapi)
//
// A subset of the IAM language: Allow/Deny, Principal "*" or AWS names
// (access keys or identity names), s3: actions and resources of the bucket
// with wildcards, IAM conditions on the request (conditionValues). authorize evaluates an operation as its
// IAM action (policyAction) on the bucket or object ARN: a matching Deny
// wins (except for an Admin putting or deleting the policy), then the
// identity's own actions, then a matching Allow, then the canned ACL.
// The bucket entry (ACL and policy) is read once per request.
//
// Errors are S3 XML bodies (no body for HEAD) with the code and status of
// errors.go; what the table does not know is a 500 InternalError and is
// logged. A GET whose data fails after the headers were sent is aborted
// (the connection is cut) so that the client sees a failed transfer, never
// a short object.
//
// # Versioning
//
// Enabled and Suspended buckets (objectapi has the layout): responses of
// writes carry x-amz-version-id (never for unversioned buckets), reads and
// deletes take ?versionId=, a read that resolves to a delete marker sends
// x-amz-delete-marker: true (404 NoSuchKey for the latest, 405 for a
// marker named by id), and DeleteObjects reports DeleteMarker and
// DeleteMarkerVersionId. MFA delete is NotImplemented.
//
// # Server-side encryption (sse.go, sse_bucket.go)
//
// encryptionFor turns a write's SSE headers (or the bucket's default
// encryption) into an objectapi.Encryption: a fresh data key and its
// sse.Meta, the key sealed under the customer's key (SSE-C), the key
// derived from the master key (SSE-S3) or a KMS key of Config.KMS (SSE-KMS,
// optionally through a per-bucket bucket key, bucketKeyCache). Reads hand
// the object layer a KeyFunc (keyFunc) that checks the request's SSE-C
// headers against the object's stored key MAC and opens its data key; the
// copy source's headers have the x-amz-copy-source- prefix. sseHeaders
// describes an object's encryption in responses. Key-service errors become
// S3's KMS.* codes (400), never a 500.
//
// # Not implemented
//
// ACL grant documents (only canned ACLs), lifecycle transitions, object
// lock, SigV4a.
package s3

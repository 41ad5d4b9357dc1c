// Package s3 is Kelp's S3 gateway: an HTTP server that speaks the Amazon
// S3 REST API over the object layer (internal/objectapi), so that the aws
// CLI, the AWS SDKs, rclone and s3cmd work with their default settings.
//
// It owns the routing of a request to an operation (router.go: method,
// path- or virtual-hosted-style bucket, key and sub-resource), the wire
// formats (XML documents and headers, one file per operation group:
// bucket.go, object_get.go, object_put.go, object_delete.go, list.go,
// multipart.go, tagging.go, cors.go, acl.go, bucket_access.go),
// authentication (auth.go, with signatures checked by sigv4), accounts and
// ownership (ownership.go), authorisation (authz.go) and errors.go, the one table
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
// Signature V2); the access key selects an Identity. A request with no
// signature is anonymous. CORS preflights (OPTIONS) are answered from the
// bucket's CORS rules without authentication; other requests with an
// allowed Origin get the same CORS headers (cors.go), errors included.
//
// Authentication and authorisation use the request's head only: a body
// announced with Expect: 100-continue is invited (100 Continue) only once
// they have passed, so a refused client never sends it.
//
// # Accounts, ownership and ACLs (ownership.go, acl.go, authz.go)
//
// Every identity is an account with a canonical id (by default derived
// from its name). A bucket is owned by its creator, an object by its
// writer or by the bucket owner (object ownership controls), both stored
// by objectapi. authorize decides each operation by, in order: a policy
// Deny; Admin or the action scoped to the bucket (the operator's grant);
// ownership within the identity's unscoped actions; a policy Allow; ACL
// grants (object ACL for object reads and ACL operations, bucket ACL for
// listing and writing), unless the bucket is BucketOwnerEnforced; the
// public access block filters public grants and public policies. The
// rule is written out in authz.go and checked against a reference model
// by TestAuthorizationModel. Other packages ask authorize with an IAM
// action name as op (e.g. "BypassGovernanceRetention", ActionAdmin): the
// bucket owner, Admin and policies can allow those.
//
// # Conditional requests (conditional.go)
//
// Writes (PUT, copy, multipart completion) take If-Match and If-None-Match
// ("*" or ETags) and If-Unmodified-Since (RFC 9110 §13.1.4: ignored under
// If-Match, when not an HTTP date, or when the key has no current object),
// deletes also x-amz-if-match-last-modified-time and x-amz-if-match-size
// (per object in DeleteObjects); objectapi checks them in the transaction
// that writes or deletes. If-Modified-Since is ignored on writes and
// deletes, as RFC 9110 §13.1.3 requires for methods other than GET/HEAD.
//
// # Bucket policies (policy.go; parsed and stored by objectapi)
//
// A subset of the IAM language: Allow/Deny, Principal "*" or AWS names
// (access keys or identity names), s3: actions and resources of the bucket
// with wildcards, IAM conditions on the request (conditionValues). authorize evaluates an operation as its
// IAM action (policyAction) on the bucket or object ARN: a matching Deny
// wins (except for the owner or an Admin putting or deleting the policy),
// then the order above. The bucket entry (owner, ACL, ownership, public
// access block, policy) is read once per request.
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
// # Object lock (objectlock.go; enforced by objectapi)
//
// ?object-lock on buckets, ?retention and ?legal-hold on objects, the
// x-amz-object-lock-* headers of PUT, copy and multipart create (parsed by
// metadata into objectapi.Metadata.Lock) and of GET/HEAD, and
// x-amz-bucket-object-lock-enabled on CreateBucket. A request with
// x-amz-bypass-governance-retention: true gets objectapi.WithGovernanceBypass
// on its context when it holds s3:BypassGovernanceRetention
// (mayBypassGovernance: authorize with that IAM action, which the bucket
// owner, Admin identities and policy grants hold).
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
// Lifecycle transitions, MFA delete, SigV4a.
package s3

// Package sigv4 authenticates S3 requests the way Amazon S3 does, so that
// aws CLI, boto3, aws-sdk-go-v2, rclone and s3cmd work with their default
// settings. It owns AWS Signature Version 4 verification (Authorization
// header and presigned query), the aws-chunked body encoding with its
// chunk and trailer signatures, flexible-checksum trailers, and, for
// compatibility, Signature Version 2. It is imported only by internal/s3;
// it uses nothing but the standard library and defines no on-disk format.
//
// # Use
//
//	v := &sigv4.Verifier{Creds: creds}      // Region "" = any region
//	res, err := v.Verify(r)                 // err is *sigv4.Error: 4xx Code/Status for the XML error
//	...                                     // authorise res.AccessKey (or res.Anonymous)
//	n, err := io.Copy(dst, r.Body)          // decoded, verified body
//	if err != nil { discard what was written; map err like Verify's }
//	sums := res.Trailer()                   // x-amz-checksum-* sent after the data, if any
//
// Verify checks everything that can be checked before the body: the
// signature over method, path, query, signed headers and the declared
// payload hash; the credential scope; the clock skew (15 minutes) or the
// presigned expiry (at most a week). The body cannot be checked up front
// without buffering it, so Verify replaces r.Body with a reader that checks
// it as the handler reads:
//
//   - hex SHA-256 in x-amz-content-sha256: bytes pass through; at the end
//     Read returns ErrContentSHA256Mismatch instead of io.EOF if the hash
//     differs.
//   - UNSIGNED-PAYLOAD (and every presigned URL unless it signs a hash,
//     and Signature Version 2): r.Body is left alone.
//   - STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER] and
//     STREAMING-UNSIGNED-PAYLOAD-TRAILER: the aws-chunked framing is removed;
//     each chunk signature is verified, chained from the request signature;
//     trailing headers are parsed, must match x-amz-trailer, are verified
//     against the trailer signature when signed, and an x-amz-checksum-crc32,
//     -crc32c, -crc64nvme, -sha1 or -sha256 trailer is compared with the data
//     (ErrBadDigest). x-amz-decoded-content-length must equal the decoded
//     size; it is in Result.DecodedContentLength and r.ContentLength. The
//     gateway stores ContentEncoding(r.Header), not the raw header.
//
// The contract for the body: data is released before the signature or
// hash that covers it has been checked (the signature follows the chunk;
// the hash covers the whole body), and nothing is buffered beyond a 64 KiB
// read buffer, so a 5 GiB part streams. Only a body read to io.EOF is
// authentic; any error from Read means the handler must discard what it
// got. Errors are sticky. Errors from the underlying connection (timeouts,
// http.MaxBytesReader) are passed through unchanged; everything else is an
// *Error.
//
// # Canonicalisation choices
//
// The canonical URI re-encodes the decoded path with the SigV4 rules
// (unreserved characters kept, '/' kept, everything else %XX), without
// normalising "." or ".." or merging slashes and without double encoding,
// as S3 does. Query names and values are decoded and re-encoded, sorted by
// name then value; a parameter without '=' has an empty value. Headers are
// taken from r.Header (Host from r.Host), values trimmed and inner white
// space collapsed, repeated headers joined with ','. When the first
// canonical form does not match, the wire form of the path and query, and
// the Host without a default port, are tried too: they are alternative
// readings of the very request received, so no other request is accepted.
//
// # Decisions
//
//   - Region: Verifier.Region "" accepts whatever region the client signed
//     for (self-hosted stores have no real regions and clients default to
//     different ones); a set Region is enforced like S3
//     (AuthorizationHeaderMalformed).
//   - Service must be "s3"; x-amz-date (or Date) and host must be signed;
//     every x-amz-* header present must be signed (ErrHeadersNotSigned),
//     since they change what the request does.
//   - x-amz-content-sha256 is required with header authentication, as S3
//     requires it; a presigned URL signs UNSIGNED-PAYLOAD unless it carries
//     X-Amz-Content-Sha256.
//   - A request with no signature at all is not an error: Result.Anonymous.
//   - Signature Version 2 is verified unless Verifier.DisableV2, because
//     botocore presigns with it by default; it covers no payload. SigV4a
//     (AWS4-ECDSA-P256-SHA256) is refused with ErrUnsupportedAuth.
//   - X-Amz-Security-Token is reported in Result.SessionToken but not
//     validated (there is no STS); the gateway decides.
//
// Verifier and Credentials are safe for concurrent use; a Result and the
// body Verify installs belong to the request's goroutine.
package sigv4

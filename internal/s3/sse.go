package s3

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/kelpfs/kelp/internal/kms"
	"github.com/kelpfs/kelp/internal/objectapi"
	"github.com/kelpfs/kelp/internal/sse"
)

// Server-side encryption headers: which encryption a write asks for
// (or the bucket's default), the key checks of reads, and the headers of
// responses. The format is internal/sse's, the keys internal/kms's.

// Header names, canonical so that looking them up on every request
// allocates nothing.
var (
	hSSE          = http.CanonicalHeaderKey("x-amz-server-side-encryption")
	hSSEKMSKey    = http.CanonicalHeaderKey("x-amz-server-side-encryption-aws-kms-key-id")
	hSSEContext   = http.CanonicalHeaderKey("x-amz-server-side-encryption-context")
	hSSEBucketKey = http.CanonicalHeaderKey("x-amz-server-side-encryption-bucket-key-enabled")
	hSSECAlg      = http.CanonicalHeaderKey("x-amz-server-side-encryption-customer-algorithm")
	hSSECKey      = http.CanonicalHeaderKey("x-amz-server-side-encryption-customer-key")
	hSSECKeyMD5   = http.CanonicalHeaderKey("x-amz-server-side-encryption-customer-key-md5")
)

// copySrcPrefix replaces "X-Amz-" in the SSE-C headers of a copy's source.
const copySrcPrefix = "X-Amz-Copy-Source-"

var (
	errSSENotApplicable = newErr("InvalidRequest", http.StatusBadRequest, "The encryption parameters are not applicable to this object.")
	errSSECRequired     = newErr("InvalidRequest", http.StatusBadRequest, "The object was stored using a form of Server Side Encryption. The correct parameters must be provided to retrieve the object.")
	errSSECWrongKey     = newErr("AccessDenied", http.StatusForbidden, "Access Denied: the customer key does not match the object's")
	errSSECKeyMD5       = newErr("InvalidArgument", http.StatusBadRequest, "The calculated MD5 hash of the key did not match the hash that was provided.")
	errSSECBadKey       = newErr("InvalidArgument", http.StatusBadRequest, "The secret key was invalid for the specified algorithm.")
	errSSECAlgorithm    = newErr("InvalidEncryptionAlgorithmError", http.StatusBadRequest, "The encryption request you specified is not valid. The valid value is AES256.")
	errSSECIncomplete   = newErr("InvalidRequest", http.StatusBadRequest, "Requests specifying Server Side Encryption with Customer provided keys must provide the algorithm, the key and the key's MD5.")
	errSSEMixed         = newErr("InvalidArgument", http.StatusBadRequest, "Server Side Encryption with Customer provided key is incompatible with the encryption method specified")
	errSSEKMSKeyNoKMS   = newErr("InvalidArgument", http.StatusBadRequest, "Server Side Encryption with AWS KMS managed key requires HTTP header x-amz-server-side-encryption : aws:kms")
	errSSEContext       = newErr("InvalidArgument", http.StatusBadRequest, "The header 'x-amz-server-side-encryption-context' must be base64-encoded UTF-8 JSON with string values.")
	errNoKMS            = newErr("NotImplemented", http.StatusNotImplemented, "This gateway has no key service configured (SSE-S3 and SSE-KMS need one)")
	errKMSDisabled      = newErr("KMS.DisabledException", http.StatusBadRequest, "The KMS key is disabled.")
	errKMSNotFound      = newErr("KMS.NotFoundException", http.StatusBadRequest, "Invalid keyId: the KMS key does not exist.")
	errKMSCiphertext    = newErr("KMS.InvalidCiphertextException", http.StatusBadRequest, "The data key of the object does not open with its KMS key and encryption context.")
)

// kmsError turns a key service error into the S3 error S3 sends for it.
func kmsError(err error) error {
	switch {
	case errors.Is(err, kms.ErrNotFound):
		e := *errKMSNotFound
		e.Message = err.Error()
		return &e
	case errors.Is(err, kms.ErrDisabled):
		e := *errKMSDisabled
		e.Message = err.Error()
		return &e
	case errors.Is(err, kms.ErrInvalidCiphertext):
		return errKMSCiphertext
	}
	return err
}

// customerKey reads the SSE-C headers with prefix ("" or
// copySrcPrefix): the key, or nil when none are sent.
func customerKey(h http.Header, prefix string) ([]byte, error) {
	name := func(n string) string {
		if prefix == "" {
			return n
		}
		return prefix + strings.TrimPrefix(n, "X-Amz-")
	}
	alg, key, sum := h.Get(name(hSSECAlg)), h.Get(name(hSSECKey)), h.Get(name(hSSECKeyMD5))
	if alg == "" && key == "" && sum == "" {
		return nil, nil
	}
	if alg == "" || key == "" || sum == "" {
		return nil, errSSECIncomplete
	}
	if alg != "AES256" {
		return nil, errSSECAlgorithm
	}
	k, err := base64.StdEncoding.DecodeString(key)
	if err != nil || len(k) != sse.KeySize {
		return nil, errSSECBadKey
	}
	want, err := base64.StdEncoding.DecodeString(sum)
	got := md5.Sum(k)
	if err != nil || string(want) != string(got[:]) {
		return nil, errSSECKeyMD5
	}
	return k, nil
}

// sseRequest is the encryption a write asks for in its headers.
type sseRequest struct {
	kind        sse.Kind // "" none asked
	customerKey []byte
	kmsKey      string // "" the default key
	context     []byte // canonical JSON, nil none given
	bucketKey   *bool
}

func parseSSERequest(h http.Header) (*sseRequest, error) {
	req := &sseRequest{}
	ck, err := customerKey(h, "")
	if err != nil {
		return nil, err
	}
	v := h.Get(hSSE)
	switch {
	case ck != nil && v != "":
		return nil, errSSEMixed
	case ck != nil:
		req.kind, req.customerKey = sse.KindC, ck
	case v == "":
	case v == string(sse.KindS3):
		req.kind = sse.KindS3
	case v == string(sse.KindKMS), v == "aws:kms:dsse":
		req.kind = sse.KindKMS // dual-layer is one layer here: the key service is local
	default:
		return nil, &apiError{Code: "InvalidArgument", Status: http.StatusBadRequest, Message: "The encryption method specified is not supported: " + v}
	}
	if id := h.Get(hSSEKMSKey); id != "" {
		if req.kind != sse.KindKMS {
			return nil, errSSEKMSKeyNoKMS
		}
		req.kmsKey = id
	}
	if c := h.Get(hSSEContext); c != "" {
		if req.kind != sse.KindKMS {
			return nil, errSSEKMSKeyNoKMS
		}
		if req.context, err = canonicalContext(c); err != nil {
			return nil, err
		}
	}
	if b := h.Get(hSSEBucketKey); b != "" {
		on := strings.EqualFold(b, "true")
		if !on && !strings.EqualFold(b, "false") {
			return nil, &apiError{Code: "InvalidArgument", Status: http.StatusBadRequest, Message: "x-amz-server-side-encryption-bucket-key-enabled must be true or false"}
		}
		req.bucketKey = &on
	}
	return req, nil
}

// canonicalContext decodes an encryption context header into JSON with
// sorted keys, the form bound into the sealing.
func canonicalContext(v string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return nil, errSSEContext
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, errSSEContext
	}
	b, _ := json.Marshal(m) // map keys come out sorted
	return b, nil
}

// encryptionFor decides how a new object (or upload) of bucket/key is
// encrypted: as the request says, else as the bucket's default
// encryption says, else not at all.
func (s *Server) encryptionFor(rq *request, bucket, key string, h http.Header) (*objectapi.Encryption, error) {
	req, err := parseSSERequest(h)
	if err != nil {
		return nil, err
	}
	if req.kind == "" {
		def, err := objectapi.DecodeBucketEncryption(s.loadAccess(rq, bucket).encryption)
		if err != nil || def == nil {
			return nil, err
		}
		req.kind, req.kmsKey = sse.Kind(def.Algorithm), def.KMSKeyID
		if req.bucketKey == nil {
			req.bucketKey = &def.BucketKey
		}
	}
	if req.kind == "" {
		return nil, nil
	}
	m := sse.NewMeta(req.kind)
	dek := sse.NewKey()
	switch req.kind {
	case sse.KindC:
		m.SetCustomerKey(req.customerKey)
		m.SealedKey, err = sse.SealKey(req.customerKey, dek, []byte("kelp sse-c"))
	case sse.KindS3:
		if s.cfg.KMS == nil {
			return nil, errNoKMS
		}
		m.SealedKey, err = sse.SealKey(s.cfg.KMS.S3Key(), dek, []byte("kelp sse-s3"))
	case sse.KindKMS:
		err = s.sealKMS(m, dek, req, bucket, key)
	}
	if err != nil {
		return nil, err
	}
	return &objectapi.Encryption{Meta: m, Key: dek}, nil
}

// sealKMS seals dek for SSE-KMS: under the KMS key, or, with a bucket
// key, under the bucket's data key (itself sealed under the KMS key).
func (s *Server) sealKMS(m *sse.Meta, dek []byte, req *sseRequest, bucket, key string) error {
	if s.cfg.KMS == nil {
		return errNoKMS
	}
	ref := req.kmsKey
	if ref == "" {
		def, err := s.cfg.KMS.DefaultKey()
		if err != nil {
			return kmsError(err)
		}
		ref = def.ID
	}
	m.Context = string(req.context)
	if req.context == nil {
		// As S3: the object's ARN when the client gives no context.
		b, _ := json.Marshal(map[string]string{"aws:s3:arn": "arn:aws:s3:::" + bucket + "/" + key})
		m.Context = string(b)
	}
	if req.bucketKey != nil && *req.bucketKey {
		bk, err := s.bucketKeys.get(s.cfg.KMS, bucket, ref)
		if err != nil {
			return kmsError(err)
		}
		m.BucketKey, m.KeyID, m.SealedBucketKey = true, bk.keyID, bk.sealed
		m.SealedKey, err = sse.SealKey(bk.plain, dek, []byte(m.Context))
		return err
	}
	id, sealed, err := s.cfg.KMS.Seal(ref, dek, []byte(m.Context))
	if err != nil {
		return kmsError(err)
	}
	m.KeyID, m.SealedKey = id, sealed
	return nil
}

// keyFunc returns the data keys of objects for a request whose SSE-C
// headers (if any) have prefix.
func (s *Server) keyFunc(h http.Header, prefix string) objectapi.KeyFunc {
	return func(m *sse.Meta) ([]byte, error) {
		ck, err := customerKey(h, prefix)
		if err != nil {
			return nil, err
		}
		if m == nil || m.Kind != sse.KindC {
			if ck != nil {
				return nil, errSSENotApplicable
			}
			if m == nil {
				return nil, nil
			}
		}
		return s.openDataKey(m, ck)
	}
}

// openDataKey opens the data key of an object encrypted as m; ck is the
// customer key the request gave (SSE-C).
func (s *Server) openDataKey(m *sse.Meta, ck []byte) ([]byte, error) {
	var (
		dek []byte
		err error
	)
	switch m.Kind {
	case sse.KindC:
		if ck == nil {
			return nil, errSSECRequired
		}
		if !m.CustomerKeyMatches(ck) {
			return nil, errSSECWrongKey
		}
		dek, err = sse.OpenKey(ck, m.SealedKey, []byte("kelp sse-c"))
	case sse.KindS3:
		if s.cfg.KMS == nil {
			return nil, errNoKMS
		}
		dek, err = sse.OpenKey(s.cfg.KMS.S3Key(), m.SealedKey, []byte("kelp sse-s3"))
	case sse.KindKMS:
		if s.cfg.KMS == nil {
			return nil, errNoKMS
		}
		if m.BucketKey {
			var bk []byte
			if bk, err = s.bucketKeys.open(s.cfg.KMS, m.KeyID, m.SealedBucketKey); err != nil {
				return nil, kmsError(err)
			}
			dek, err = sse.OpenKey(bk, m.SealedKey, []byte(m.Context))
		} else if dek, err = s.cfg.KMS.Unseal(m.KeyID, m.SealedKey, []byte(m.Context)); err != nil {
			return nil, kmsError(err)
		}
	default:
		return nil, errors.New("s3: object has unknown encryption " + string(m.Kind))
	}
	if err != nil {
		return nil, err // the stored key does not open: damaged metadata, a 500
	}
	return dek, nil
}

// readKeys are the key functions of a request that reads objects.
func (s *Server) readKeys(rq *request) objectapi.Keys {
	return objectapi.Keys{Object: s.keyFunc(rq.r.Header, ""), Source: s.keyFunc(rq.r.Header, copySrcPrefix)}
}

// sseHeaders sets the response headers that describe an object's
// encryption; reqHeader is the request, whose SSE-C key MD5 is echoed.
func sseHeaders(h http.Header, m *sse.Meta, reqHeader http.Header, withContext bool) {
	if m == nil {
		return
	}
	switch m.Kind {
	case sse.KindC:
		h.Set(hSSECAlg, "AES256")
		if v := reqHeader.Get(hSSECKeyMD5); v != "" {
			h.Set(hSSECKeyMD5, v)
		}
	case sse.KindS3:
		h.Set(hSSE, string(sse.KindS3))
	case sse.KindKMS:
		h.Set(hSSE, string(sse.KindKMS))
		h.Set(hSSEKMSKey, m.KeyID)
		if m.BucketKey {
			h.Set(hSSEBucketKey, "true")
		}
		if withContext && m.Context != "" {
			h.Set(hSSEContext, base64.StdEncoding.EncodeToString([]byte(m.Context)))
		}
	}
}

// bucketKeyCache keeps S3 bucket keys: a data key per bucket and KMS key,
// sealed once under the KMS key and then used to seal the data keys of
// many objects, so that the key service is asked once per bucket key
// rather than once per object. A bucket key is used for new objects for
// bucketKeyLifetime, then a new one is made.
type bucketKeyCache struct {
	mu     sync.Mutex
	byName map[string]*bucketKey // bucket + "\x00" + key ref -> key for new objects
	opened map[string][]byte     // sealed bucket key -> plain
}

type bucketKey struct {
	keyID         string
	plain, sealed []byte
	made          time.Time
}

const bucketKeyLifetime = 10 * time.Minute

func (c *bucketKeyCache) get(k *kms.Service, bucket, ref string) (*bucketKey, error) {
	// The KMS key's state is checked on each use: disabling it stops new
	// writes at once, as it stops reads.
	info, err := k.Describe(ref)
	if err != nil {
		return nil, err
	}
	if !info.Enabled {
		return nil, kms.ErrDisabled
	}
	name := bucket + "\x00" + info.ID
	c.mu.Lock()
	defer c.mu.Unlock()
	if bk := c.byName[name]; bk != nil && time.Since(bk.made) < bucketKeyLifetime {
		return bk, nil
	}
	plain := sse.NewKey()
	ctx, _ := json.Marshal(map[string]string{"aws:s3:arn": "arn:aws:s3:::" + bucket})
	id, sealed, err := k.Seal(info.ID, plain, ctx)
	if err != nil {
		return nil, err
	}
	bk := &bucketKey{keyID: id, plain: plain, sealed: sealedWithContext(sealed, ctx), made: time.Now()}
	if c.byName == nil {
		c.byName, c.opened = map[string]*bucketKey{}, map[string][]byte{}
	}
	c.byName[name] = bk
	c.opened[string(bk.sealed)] = plain
	return bk, nil
}

// sealedWithContext stores a sealed bucket key with the context it was
// sealed with (the bucket's ARN), so that it opens wherever the object
// goes: 2-byte length of the sealed key, the sealed key, the context.
func sealedWithContext(sealed, ctx []byte) []byte {
	out := []byte{byte(len(sealed) >> 8), byte(len(sealed))}
	out = append(out, sealed...)
	return append(out, ctx...)
}

func (c *bucketKeyCache) open(k *kms.Service, keyID string, stored []byte) ([]byte, error) {
	info, err := k.Describe(keyID)
	if err != nil {
		return nil, err
	}
	if !info.Enabled {
		return nil, kms.ErrDisabled
	}
	c.mu.Lock()
	plain := c.opened[string(stored)]
	c.mu.Unlock()
	if plain != nil {
		return plain, nil
	}
	if len(stored) < 2 {
		return nil, kms.ErrInvalidCiphertext
	}
	n := int(stored[0])<<8 | int(stored[1])
	if len(stored) < 2+n {
		return nil, kms.ErrInvalidCiphertext
	}
	plain, err = k.Unseal(keyID, stored[2:2+n], stored[2+n:])
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.opened == nil {
		c.byName, c.opened = map[string]*bucketKey{}, map[string][]byte{}
	}
	if len(c.opened) > 10000 { // bounded: forget everything rather than grow
		c.opened = map[string][]byte{}
	}
	c.opened[string(stored)] = plain
	c.mu.Unlock()
	return plain, nil
}

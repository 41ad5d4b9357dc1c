package objectapi

import (
	"context"
	"encoding/json"
)

// xaEncryption is a bucket's default encryption (JSON BucketEncryption).
const xaEncryption = "s3.encryption"

// BucketEncryption is a bucket's default server-side encryption, applied
// by the gateway to writes that ask for none.
type BucketEncryption struct {
	Algorithm string `json:"alg"`           // "AES256" or "aws:kms"
	KMSKeyID  string `json:"kid,omitempty"` // "" the default key
	BucketKey bool   `json:"bk,omitempty"`
}

// PutBucketEncryption sets a bucket's default encryption.
func (l *Layer) PutBucketEncryption(ctx context.Context, bucket string, enc BucketEncryption) error {
	if enc.Algorithm != "AES256" && enc.Algorithm != "aws:kms" {
		return errorf(ErrInvalidArgument, "unknown SSEAlgorithm %q", enc.Algorithm)
	}
	if enc.KMSKeyID != "" && enc.Algorithm != "aws:kms" {
		return errorf(ErrInvalidArgument, "a KMSMasterKeyID needs SSEAlgorithm aws:kms")
	}
	b, _ := json.Marshal(enc)
	return l.setBucketXattr(ctx, bucket, xaEncryption, b)
}

// GetBucketEncryption returns a bucket's default encryption, nil when it
// has none.
func (l *Layer) GetBucketEncryption(ctx context.Context, bucket string) (*BucketEncryption, error) {
	v, err := l.bucketXattr(ctx, bucket, xaEncryption)
	if err != nil {
		return nil, err
	}
	return DecodeBucketEncryption(v)
}

// DecodeBucketEncryption reads a bucket's stored default encryption
// (Bucket.Encryption), nil when there is none.
func DecodeBucketEncryption(v []byte) (*BucketEncryption, error) {
	if len(v) == 0 {
		return nil, nil
	}
	var enc BucketEncryption
	if err := json.Unmarshal(v, &enc); err != nil {
		return nil, err
	}
	return &enc, nil
}

// DeleteBucketEncryption removes a bucket's default encryption.
func (l *Layer) DeleteBucketEncryption(ctx context.Context, bucket string) error {
	return l.setBucketXattr(ctx, bucket, xaEncryption, nil)
}

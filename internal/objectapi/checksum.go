package objectapi

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"math/bits"
	"strings"
)

// Checksum algorithms (S3's names, upper case).
const (
	ChecksumCRC32     = "CRC32"
	ChecksumCRC32C    = "CRC32C"
	ChecksumCRC64NVME = "CRC64NVME"
	ChecksumSHA1      = "SHA1"
	ChecksumSHA256    = "SHA256"
)

// Checksum types.
const (
	ChecksumFullObject = "FULL_OBJECT"
	ChecksumComposite  = "COMPOSITE"
)

// ChecksumAlgorithms lists the algorithms in a fixed order.
var checksumAlgorithms = [...]string{ChecksumCRC32, ChecksumCRC32C, ChecksumCRC64NVME, ChecksumSHA1, ChecksumSHA256}

// ChecksumAlgorithms returns the supported algorithms.
func ChecksumAlgorithms() []string { return checksumAlgorithms[:] }

// Checksum is a stored checksum: Value is base64 of the big-endian digest,
// with "-N" for a composite checksum of N parts.
type Checksum struct {
	Algorithm string
	Value     string
	Type      string // FULL_OBJECT or COMPOSITE
}

// ChecksumSpec asks for a checksum to be computed while an object streams
// in; an expected value is compared with it before the object is stored.
type ChecksumSpec struct {
	Algorithm string // "" none
	Value     string // expected base64 value, or "" (Trailer, or compute only)
	// Trailer returns the expected value sent after the body, read once the
	// body is consumed; nil when none.
	Trailer func() string
}

// NormalizeChecksumAlgorithm returns the canonical name of alg, or "" when
// it is not one.
func NormalizeChecksumAlgorithm(alg string) string {
	a := strings.ToUpper(alg)
	for _, k := range checksumAlgorithms {
		if a == k {
			return k
		}
	}
	return ""
}

func newChecksumHash(alg string) hash.Hash {
	switch alg {
	case ChecksumCRC32:
		return crc32.NewIEEE()
	case ChecksumCRC32C:
		return crc32.New(crc32.MakeTable(crc32.Castagnoli))
	case ChecksumCRC64NVME:
		return crc64.New(crc64.MakeTable(bits.Reverse64(0xAD93D23594C93659)))
	case ChecksumSHA1:
		return sha1.New()
	case ChecksumSHA256:
		return sha256.New()
	}
	return nil
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func encodeChecksum(c Checksum) []byte {
	if c.Algorithm == "" {
		return nil
	}
	return []byte(c.Algorithm + ":" + c.Value + ":" + c.Type)
}

func decodeChecksum(b []byte) Checksum {
	parts := strings.SplitN(string(b), ":", 3)
	if len(parts) < 2 {
		return Checksum{}
	}
	c := Checksum{Algorithm: parts[0], Value: parts[1], Type: ChecksumFullObject}
	if len(parts) == 3 && parts[2] != "" {
		c.Type = parts[2]
	}
	return c
}

package sigv4

import (
	"crypto/sha1"
	"crypto/sha256"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"math/bits"
	"strings"
	"sync"
)

// crc64NVMETable is for the CRC-64/NVME polynomial 0xAD93D23594C93659,
// given to hash/crc64 bit-reversed as it expects; crc64's initial value and
// final xor of all ones match CRC-64/NVME (check value 0xAE8B14860A799888).
var crc64NVMETable = sync.OnceValue(func() *crc64.Table {
	return crc64.MakeTable(bits.Reverse64(0xAD93D23594C93659))
})

var crc32cTable = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// newChecksum returns the hash for a flexible-checksum trailer name
// (x-amz-checksum-crc32, -crc32c, -crc64nvme, -sha1, -sha256), or nil for
// any other name. Sum gives the big-endian digest S3 base64-encodes.
func newChecksum(trailer string) hash.Hash {
	alg, ok := strings.CutPrefix(trailer, "x-amz-checksum-")
	if !ok {
		return nil
	}
	switch alg {
	case "crc32":
		return crc32.NewIEEE()
	case "crc32c":
		return crc32.New(crc32cTable())
	case "crc64nvme":
		return crc64.New(crc64NVMETable())
	case "sha1":
		return sha1.New()
	case "sha256":
		return sha256.New()
	}
	return nil
}

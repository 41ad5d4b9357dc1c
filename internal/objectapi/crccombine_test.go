package objectapi

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// The CRC combined from the parts' CRCs equals the CRC of the whole, for
// every CRC algorithm, any number of parts and any split (empty parts too).
func TestCombineCRCsMatchesWholeCRC(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for _, alg := range []string{ChecksumCRC32, ChecksumCRC32C, ChecksumCRC64NVME} {
		for trial := range 50 {
			nparts := 1 + r.IntN(6)
			var whole []byte
			var sums [][]byte
			var sizes []int64
			for range nparts {
				part := make([]byte, r.IntN(3000))
				if trial%10 == 0 {
					part = make([]byte, 0)
				}
				for i := range part {
					part[i] = byte(r.Uint32())
				}
				h := newChecksumHash(alg)
				h.Write(part)
				sums = append(sums, h.Sum(nil))
				sizes = append(sizes, int64(len(part)))
				whole = append(whole, part...)
			}
			h := newChecksumHash(alg)
			h.Write(whole)
			got, err := combineCRCs(alg, sums, sizes)
			if err != nil || !bytes.Equal(got, h.Sum(nil)) {
				t.Fatalf("%s, %d parts %v: combined %x (%v), whole %x", alg, nparts, sizes, got, err, h.Sum(nil))
			}
		}
	}
	if _, err := combineCRCs(ChecksumSHA256, nil, nil); err == nil {
		t.Fatal("SHA256 cannot be combined")
	}
}

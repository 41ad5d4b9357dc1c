package needle

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/kelpfs/kelp/internal/ttl"
)

// Errors returned (wrapped) by this package.
var (
	ErrCorrupt  = errors.New("needle: corrupt")
	ErrTooLarge = errors.New("needle: too large")
)

// Sizes of the fixed parts of a record.
const (
	HeaderSize  = 16
	MetaSize    = 32 // fixed part of the body
	TrailerSize = 8
	Align       = 8
	// MaxBodySize keeps RecordSize within a u32 and an index offset unit.
	MaxBodySize = math.MaxUint32 - 64
	MaxPairs    = math.MaxUint16
	MaxName     = math.MaxUint8
)

// Flags stored in a needle; the volume does not interpret them.
const (
	FlagGzip          uint8 = 1 << 0 // data is gzip-compressed
	FlagChunkManifest uint8 = 1 << 1 // data lists the chunks of a large file
)

// castagnoli is the CRC32C table behind every checksum; it is never written.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC returns the CRC32C of b.
func CRC(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// UpdateCRC continues a CRC32C.
func UpdateCRC(crc uint32, b []byte) uint32 { return crc32.Update(crc, castagnoli, b) }

// Meta is a needle's identity and metadata, everything but the data.
type Meta struct {
	Key          uint64
	Cookie       uint32
	Flags        uint8
	Name         string // at most 255 bytes
	Mime         string // at most 255 bytes
	LastModified int64  // unix seconds
	TTL          ttl.TTL
	Pairs        []byte // small user metadata (e.g. JSON), at most 65535 bytes
	AppendedAtNs int64  // set by the volume when writing
}

// Header is the fixed start of every record.
type Header struct {
	Cookie   uint32
	Key      uint64
	BodySize uint32
}

// IsTombstone reports whether the record is a delete.
func (h Header) IsTombstone() bool { return h.BodySize == 0 }

// RecordSize is the length on disk of a record with the given body size,
// trailer and padding included.
func RecordSize(bodySize uint32) int64 {
	n := int64(HeaderSize) + int64(bodySize) + TrailerSize
	return (n + Align - 1) &^ (Align - 1)
}

// MetaLen is the length of the body before the data.
func (m *Meta) MetaLen() int { return MetaSize + len(m.Name) + len(m.Mime) + len(m.Pairs) }

// BodySize returns the body size of a needle with m and dataSize bytes of data.
func BodySize(m *Meta, dataSize int64) (uint32, error) {
	if len(m.Name) > MaxName || len(m.Mime) > MaxName {
		return 0, fmt.Errorf("%w: name or mime longer than %d bytes", ErrTooLarge, MaxName)
	}
	if len(m.Pairs) > MaxPairs {
		return 0, fmt.Errorf("%w: pairs longer than %d bytes", ErrTooLarge, MaxPairs)
	}
	if dataSize < 0 {
		return 0, fmt.Errorf("needle: negative data size %d", dataSize)
	}
	body := int64(m.MetaLen()) + dataSize
	if body > MaxBodySize {
		return 0, fmt.Errorf("%w: body of %d bytes", ErrTooLarge, body)
	}
	return uint32(body), nil
}

// AppendHead appends the header and the metadata part of the body (everything
// before the data) for a needle with dataSize bytes of data.
func AppendHead(dst []byte, m *Meta, dataSize int64) ([]byte, error) {
	body, err := BodySize(m, dataSize)
	if err != nil {
		return dst, err
	}
	dst = binary.BigEndian.AppendUint32(dst, m.Cookie)
	dst = binary.BigEndian.AppendUint64(dst, m.Key)
	dst = binary.BigEndian.AppendUint32(dst, body)
	c, u := m.TTL.Bytes()
	dst = append(dst, m.Flags, uint8(len(m.Name)), uint8(len(m.Mime)), c, u, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(m.Pairs)))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.LastModified))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.AppendedAtNs))
	dst = binary.BigEndian.AppendUint32(dst, uint32(dataSize))
	dst = binary.BigEndian.AppendUint32(dst, 0)
	dst = append(dst, m.Name...)
	dst = append(dst, m.Mime...)
	dst = append(dst, m.Pairs...)
	return dst, nil
}

// AppendTrailer appends the trailer and padding. recordCRC is the CRC32C of
// header and body; recordLen is the unpadded length written so far
// (header + body).
func AppendTrailer(dst []byte, dataCRC, recordCRC uint32, recordLen int64) []byte {
	var d [4]byte
	binary.BigEndian.PutUint32(d[:], dataCRC)
	dst = append(dst, d[:]...)
	dst = binary.BigEndian.AppendUint32(dst, UpdateCRC(recordCRC, d[:]))
	pad := RecordSize(uint32(recordLen-HeaderSize)) - recordLen - TrailerSize
	return append(dst, make([]byte, pad)...)
}

// AppendRecord appends a complete record holding data.
func AppendRecord(dst []byte, m *Meta, data []byte) ([]byte, error) {
	start := len(dst)
	dst, err := AppendHead(dst, m, int64(len(data)))
	if err != nil {
		return dst[:start], err
	}
	dst = append(dst, data...)
	rec := dst[start:]
	return AppendTrailer(dst, CRC(data), CRC(rec), int64(len(rec))), nil
}

// AppendTombstone appends a delete record for key.
func AppendTombstone(dst []byte, key uint64, cookie uint32) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, cookie)
	dst = binary.BigEndian.AppendUint64(dst, key)
	dst = binary.BigEndian.AppendUint32(dst, 0)
	return AppendTrailer(dst, 0, CRC(dst[start:]), HeaderSize)
}

// ParseHeader decodes the first HeaderSize bytes of b.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: short header (%d bytes)", ErrCorrupt, len(b))
	}
	h := Header{
		Cookie:   binary.BigEndian.Uint32(b),
		Key:      binary.BigEndian.Uint64(b[4:]),
		BodySize: binary.BigEndian.Uint32(b[12:]),
	}
	if h.BodySize > MaxBodySize || (h.BodySize != 0 && h.BodySize < MetaSize) {
		return h, fmt.Errorf("%w: body size %d", ErrCorrupt, h.BodySize)
	}
	return h, nil
}

// ParseMeta decodes the header and metadata from b, which must start at the
// record and hold at least the header and the fixed metadata. It returns the
// metadata, the offset of the data from the record start and the data size.
// need > len(b) means b was too short for the variable metadata: call again
// with at least need bytes. It does not verify checksums.
func ParseMeta(b []byte) (m Meta, h Header, dataOff int, dataSize uint32, need int, err error) {
	h, err = ParseHeader(b)
	if err != nil {
		return m, h, 0, 0, 0, err
	}
	if h.IsTombstone() {
		return Meta{Key: h.Key, Cookie: h.Cookie}, h, HeaderSize, 0, HeaderSize, nil
	}
	if len(b) < HeaderSize+MetaSize {
		return m, h, 0, 0, HeaderSize + MetaSize, nil
	}
	p := b[HeaderSize:]
	nameLen, mimeLen := int(p[1]), int(p[2])
	pairsLen := int(binary.BigEndian.Uint16(p[6:]))
	dataSize = binary.BigEndian.Uint32(p[24:])
	metaLen := MetaSize + nameLen + mimeLen + pairsLen
	if uint64(metaLen)+uint64(dataSize) != uint64(h.BodySize) {
		return m, h, 0, 0, 0, fmt.Errorf("%w: body size %d != metadata %d + data %d", ErrCorrupt, h.BodySize, metaLen, dataSize)
	}
	need = HeaderSize + metaLen
	if len(b) < need {
		return m, h, 0, 0, need, nil
	}
	m = Meta{
		Key:          h.Key,
		Cookie:       h.Cookie,
		Flags:        p[0],
		TTL:          ttl.FromBytes(p[3], p[4]),
		LastModified: int64(binary.BigEndian.Uint64(p[8:])),
		AppendedAtNs: int64(binary.BigEndian.Uint64(p[16:])),
	}
	v := p[MetaSize:]
	m.Name = string(v[:nameLen])
	m.Mime = string(v[nameLen : nameLen+mimeLen])
	if pairsLen > 0 {
		m.Pairs = append([]byte(nil), v[nameLen+mimeLen:metaLen-MetaSize]...)
	}
	return m, h, need, dataSize, need, nil
}

// ParseTrailer splits the 8-byte trailer into the data CRC and record CRC.
func ParseTrailer(b []byte) (dataCRC, recordCRC uint32) {
	return binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])
}

// Record is a decoded, verified record.
type Record struct {
	Meta    Meta
	Header  Header
	Data    []byte // aliases the input
	DataCRC uint32
}

// ParseRecord decodes and verifies a whole record (as produced by
// AppendRecord or AppendTombstone) at the start of b.
func ParseRecord(b []byte) (Record, error) {
	m, h, dataOff, dataSize, need, err := ParseMeta(b)
	if err != nil {
		return Record{}, err
	}
	end := int64(HeaderSize) + int64(h.BodySize)
	if need > len(b) || int64(len(b)) < end+TrailerSize {
		return Record{}, fmt.Errorf("%w: record of %d bytes truncated to %d", ErrCorrupt, RecordSize(h.BodySize), len(b))
	}
	dataCRC, recCRC := ParseTrailer(b[end:])
	if got := UpdateCRC(CRC(b[:end]), b[end:end+4]); got != recCRC {
		return Record{}, fmt.Errorf("%w: record checksum %08x, stored %08x (key %x)", ErrCorrupt, got, recCRC, h.Key)
	}
	data := b[dataOff : dataOff+int(dataSize)]
	return Record{Meta: m, Header: h, Data: data, DataCRC: dataCRC}, nil
}

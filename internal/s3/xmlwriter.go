package s3

import (
	"encoding/xml"
	"net/http"
	"strconv"
	"sync"
	"unicode/utf8"
)

// xmlWriter appends an XML document to a byte slice. The listings use it
// instead of encoding/xml, whose reflection was half of a 1,000-key
// page's CPU time. Its output is byte for byte what xml.Marshal writes for
// the same structs (list_xml_test.go checks it): the same element order,
// the same namespace attribute and the same escaping.
type xmlWriter struct {
	b []byte
}

// xmlWriters keeps documents' buffers between requests; a page of 1,000
// keys is a few hundred KiB.
var xmlWriters = sync.Pool{New: func() any { return &xmlWriter{b: make([]byte, 0, 64<<10)} }}

// maxPooledXML bounds the buffers kept: a rare huge document is not
// held for ever.
const maxPooledXML = 4 << 20

func getXMLWriter() *xmlWriter {
	w := xmlWriters.Get().(*xmlWriter)
	w.b = append(w.b[:0], xml.Header...)
	return w
}

// send writes the document as the response with status, and returns the
// buffer to the pool.
func (w *xmlWriter) send(rw http.ResponseWriter, status int) {
	rw.Header().Set("Content-Type", "application/xml")
	rw.Header().Set("Content-Length", strconv.Itoa(len(w.b)))
	rw.WriteHeader(status)
	rw.Write(w.b)
	if cap(w.b) <= maxPooledXML {
		xmlWriters.Put(w)
	}
}

// root opens the document's element with S3's namespace.
func (w *xmlWriter) root(name string) {
	w.b = append(w.b, '<')
	w.b = append(w.b, name...)
	w.b = append(w.b, ` xmlns="`...)
	w.text(s3NS)
	w.b = append(w.b, `">`...)
}

func (w *xmlWriter) open(name string) {
	w.b = append(w.b, '<')
	w.b = append(w.b, name...)
	w.b = append(w.b, '>')
}

func (w *xmlWriter) close(name string) {
	w.b = append(w.b, "</"...)
	w.b = append(w.b, name...)
	w.b = append(w.b, '>')
}

// str writes <name>v</name>, v escaped.
func (w *xmlWriter) str(name, v string) {
	w.open(name)
	w.text(v)
	w.close(name)
}

// strOmit is str that writes nothing for "" (omitempty).
func (w *xmlWriter) strOmit(name, v string) {
	if v != "" {
		w.str(name, v)
	}
}

func (w *xmlWriter) int(name string, n int64) {
	w.open(name)
	w.b = strconv.AppendInt(w.b, n, 10)
	w.close(name)
}

func (w *xmlWriter) bool(name string, v bool) {
	w.open(name)
	w.b = strconv.AppendBool(w.b, v)
	w.close(name)
}

func (w *xmlWriter) owner(name string, o owner) {
	w.open(name)
	w.str("ID", o.ID)
	w.str("DisplayName", o.DisplayName)
	w.close(name)
}

// plainXMLByte marks the bytes that are written as they are: printable
// ASCII other than the five XML specials.
var plainXMLByte = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = true
	}
	for _, c := range `&<>"'` {
		t[c] = false
	}
	return t
}()

// text appends s escaped as xml.EscapeText does: the five specials and
// tab, newline and carriage return as character references, and what XML
// 1.0 cannot carry (other control characters, invalid UTF-8, U+FFFE) as
// U+FFFD. A client that needs such keys exactly asks for
// encoding-type=url.
func (w *xmlWriter) text(s string) {
	i := 0
	for i < len(s) && plainXMLByte[s[i]] {
		i++
	}
	w.b = append(w.b, s[:i]...)
	if i < len(s) {
		w.escape(s[i:])
	}
}

func (w *xmlWriter) escape(s string) {
	last := 0
	for i := 0; i < len(s); {
		c := s[i]
		if plainXMLByte[c] {
			i++
			continue
		}
		r, width := rune(c), 1
		if c >= utf8.RuneSelf {
			r, width = utf8.DecodeRuneInString(s[i:])
		}
		var esc string
		switch r {
		case '"':
			esc = "&#34;"
		case '\'':
			esc = "&#39;"
		case '&':
			esc = "&amp;"
		case '<':
			esc = "&lt;"
		case '>':
			esc = "&gt;"
		case '\t':
			esc = "&#x9;"
		case '\n':
			esc = "&#xA;"
		case '\r':
			esc = "&#xD;"
		default:
			if !xmlChar(r) || r == utf8.RuneError && width == 1 {
				esc = "\uFFFD"
			}
		}
		if esc != "" {
			w.b = append(w.b, s[last:i]...)
			w.b = append(w.b, esc...)
			last = i + width
		}
		i += width
	}
	w.b = append(w.b, s[last:]...)
}

// xmlChar reports whether r is in XML 1.0's Char production.
func xmlChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
}

// The documents, element for element in the order of their structs'
// fields (which remain their schema: xml.Marshal of them is the
// reference the test compares with).

func (r *listBucketResult) writeXML(w *xmlWriter) {
	w.root("ListBucketResult")
	w.str("Name", r.Name)
	w.str("Prefix", r.Prefix)
	if r.Marker != nil {
		w.str("Marker", *r.Marker)
	}
	w.strOmit("NextMarker", r.NextMarker)
	w.strOmit("StartAfter", r.StartAfter)
	w.strOmit("ContinuationToken", r.ContToken)
	w.strOmit("NextContinuationToken", r.NextContToken)
	if r.KeyCount != nil {
		w.int("KeyCount", int64(*r.KeyCount))
	}
	w.int("MaxKeys", int64(r.MaxKeys))
	w.strOmit("Delimiter", r.Delimiter)
	w.strOmit("EncodingType", r.EncodingType)
	w.bool("IsTruncated", r.IsTruncated)
	for i := range r.Contents {
		r.Contents[i].writeXML(w)
	}
	writeCommonPrefixes(w, r.CommonPrefixes)
	w.close("ListBucketResult")
}

func (o *objectXML) writeXML(w *xmlWriter) {
	w.open("Contents")
	w.str("Key", o.Key)
	w.str("LastModified", o.LastModified)
	w.str("ETag", o.ETag)
	w.int("Size", o.Size)
	w.str("StorageClass", o.StorageClass)
	if o.Owner != nil {
		w.owner("Owner", *o.Owner)
	}
	w.strOmit("ChecksumAlgorithm", o.ChecksumAlgorithm)
	w.close("Contents")
}

func writeCommonPrefixes(w *xmlWriter, ps []commonPrefix) {
	for _, p := range ps {
		w.open("CommonPrefixes")
		w.str("Prefix", p.Prefix)
		w.close("CommonPrefixes")
	}
}

func (r *listVersionsResult) writeXML(w *xmlWriter) {
	w.root("ListVersionsResult")
	w.str("Name", r.Name)
	w.str("Prefix", r.Prefix)
	w.str("KeyMarker", r.KeyMarker)
	w.str("VersionIdMarker", r.VersionIDMarker)
	w.strOmit("NextKeyMarker", r.NextKeyMarker)
	w.strOmit("NextVersionIdMarker", r.NextVersionIDMarker)
	w.int("MaxKeys", int64(r.MaxKeys))
	w.strOmit("Delimiter", r.Delimiter)
	w.bool("IsTruncated", r.IsTruncated)
	w.strOmit("EncodingType", r.EncodingType)
	for i := range r.Entries {
		r.Entries[i].writeXML(w)
	}
	writeCommonPrefixes(w, r.CommonPrefixes)
	w.close("ListVersionsResult")
}

func (v *versionXML) writeXML(w *xmlWriter) {
	w.open(v.XMLName.Local)
	w.str("Key", v.Key)
	w.str("VersionId", v.VersionID)
	w.bool("IsLatest", v.IsLatest)
	w.str("LastModified", v.LastModified)
	w.strOmit("ETag", v.ETag)
	if v.Size != nil {
		w.int("Size", *v.Size)
	}
	w.owner("Owner", v.Owner)
	w.strOmit("StorageClass", v.StorageClass)
	w.close(v.XMLName.Local)
}

func (r *listUploadsResult) writeXML(w *xmlWriter) {
	w.root("ListMultipartUploadsResult")
	w.str("Bucket", r.Bucket)
	w.str("KeyMarker", r.KeyMarker)
	w.str("UploadIdMarker", r.UploadIDMarker)
	w.str("NextKeyMarker", r.NextKeyMarker)
	w.str("NextUploadIdMarker", r.NextUploadIDMarker)
	w.str("Prefix", r.Prefix)
	w.strOmit("Delimiter", r.Delimiter)
	w.int("MaxUploads", int64(r.MaxUploads))
	w.strOmit("EncodingType", r.EncodingType)
	w.bool("IsTruncated", r.IsTruncated)
	for _, u := range r.Uploads {
		w.open("Upload")
		w.str("Key", u.Key)
		w.str("UploadId", u.UploadID)
		w.owner("Initiator", u.Initiator)
		w.owner("Owner", u.Owner)
		w.str("StorageClass", u.StorageClass)
		w.str("Initiated", u.Initiated)
		w.close("Upload")
	}
	writeCommonPrefixes(w, r.CommonPrefixes)
	w.close("ListMultipartUploadsResult")
}

func (r *listPartsResult) writeXML(w *xmlWriter) {
	w.root("ListPartsResult")
	w.str("Bucket", r.Bucket)
	w.str("Key", r.Key)
	w.str("UploadId", r.UploadID)
	w.int("PartNumberMarker", int64(r.PartNumberMarker))
	w.int("NextPartNumberMarker", int64(r.NextPartNumberMarker))
	w.int("MaxParts", int64(r.MaxParts))
	w.bool("IsTruncated", r.IsTruncated)
	w.owner("Initiator", r.Initiator)
	w.owner("Owner", r.Owner)
	w.str("StorageClass", r.StorageClass)
	w.strOmit("ChecksumAlgorithm", r.ChecksumAlgorithm)
	w.strOmit("ChecksumType", r.ChecksumType)
	for _, p := range r.Parts {
		w.open("Part")
		w.int("PartNumber", int64(p.PartNumber))
		w.str("LastModified", p.LastModified)
		w.str("ETag", p.ETag)
		w.int("Size", p.Size)
		w.strOmit("ChecksumCRC32", p.ChecksumCRC32)
		w.strOmit("ChecksumCRC32C", p.ChecksumCRC32C)
		w.strOmit("ChecksumCRC64NVME", p.ChecksumCRC64NVME)
		w.strOmit("ChecksumSHA1", p.ChecksumSHA1)
		w.strOmit("ChecksumSHA256", p.ChecksumSHA256)
		w.close("Part")
	}
	w.close("ListPartsResult")
}

// xmlDoc is a document that writes itself.
type xmlDoc interface{ writeXML(*xmlWriter) }

// sendXML writes d as the response with status.
func sendXML(rw http.ResponseWriter, status int, d xmlDoc) {
	w := getXMLWriter()
	d.writeXML(w)
	w.send(rw, status)
}

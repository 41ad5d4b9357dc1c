package s3

import (
	"bytes"
	"encoding/xml"
	"math/rand/v2"
	"strings"
	"testing"
)

// randXMLString is a string of up to 12 pieces drawn from what keys can
// hold: ASCII, the XML specials, control characters, multi-byte and
// astral characters, non-characters and invalid UTF-8.
func randXMLString(r *rand.Rand) string {
	pieces := []string{"a", "Z", "0", "/", " ", "+", "%", "=", "&", "<", ">", `"`, "'", "\t", "\n", "\r",
		"\x00", "\x01", "\x1f", "\x7f", "é", "日本", "\u2028", "\U0001F600", "\uFFFD", "\uFFFE", "\uFFFF",
		"\xff", "\xc3", "\xed\xa0\x80", "]]>", "&amp;"}
	var sb strings.Builder
	for range r.IntN(13) {
		sb.WriteString(pieces[r.IntN(len(pieces))])
	}
	return sb.String()
}

// marshalRef is the document as encoding/xml writes it (the old writeXML).
func marshalRef(t *testing.T, v any) []byte {
	b, err := xml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(xml.Header), b...)
}

func written(d xmlDoc) []byte {
	w := &xmlWriter{}
	w.b = append(w.b, xml.Header...)
	d.writeXML(w)
	return w.b
}

// TestXMLWriterMatchesEncodingXML: for random documents of every
// listing, the streaming writer's bytes equal xml.Marshal's.
func TestXMLWriterMatchesEncodingXML(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 16))
	s := func() string { return randXMLString(r) }
	opt := func() string {
		if r.IntN(2) == 0 {
			return ""
		}
		return s()
	}
	ow := func() owner { return owner{ID: opt(), DisplayName: opt()} }
	for i := range 2000 {
		var docs []xmlDoc
		lb := &listBucketResult{Xmlns: s3NS, Name: s(), Prefix: opt(), NextMarker: opt(), StartAfter: opt(), ContToken: opt(),
			NextContToken: opt(), MaxKeys: r.IntN(1001), Delimiter: opt(), EncodingType: opt(), IsTruncated: r.IntN(2) == 0}
		if r.IntN(2) == 0 {
			m := opt()
			lb.Marker = &m
		}
		if r.IntN(2) == 0 {
			n := r.IntN(1001)
			lb.KeyCount = &n
		}
		for range r.IntN(4) {
			o := objectXML{Key: s(), LastModified: s(), ETag: s(), Size: r.Int64() - r.Int64(), StorageClass: s(), ChecksumAlgorithm: opt()}
			if r.IntN(2) == 0 {
				x := ow()
				o.Owner = &x
			}
			lb.Contents = append(lb.Contents, o)
		}
		for range r.IntN(3) {
			lb.CommonPrefixes = append(lb.CommonPrefixes, commonPrefix{s()})
		}
		docs = append(docs, lb)

		lv := &listVersionsResult{Xmlns: s3NS, Name: s(), Prefix: opt(), KeyMarker: opt(), VersionIDMarker: opt(), NextKeyMarker: opt(),
			NextVersionIDMarker: opt(), MaxKeys: r.IntN(1001), Delimiter: opt(), IsTruncated: r.IntN(2) == 0, EncodingType: opt()}
		for range r.IntN(4) {
			v := versionXML{XMLName: xml.Name{Local: "Version"}, Key: s(), VersionID: s(), IsLatest: r.IntN(2) == 0,
				LastModified: s(), ETag: opt(), Owner: ow(), StorageClass: opt()}
			if r.IntN(2) == 0 {
				v.XMLName.Local = "DeleteMarker"
			} else {
				n := r.Int64N(1 << 40)
				v.Size = &n
			}
			lv.Entries = append(lv.Entries, v)
		}
		for range r.IntN(3) {
			lv.CommonPrefixes = append(lv.CommonPrefixes, commonPrefix{s()})
		}
		docs = append(docs, lv)

		lu := &listUploadsResult{Xmlns: s3NS, Bucket: s(), KeyMarker: opt(), UploadIDMarker: opt(), NextKeyMarker: opt(),
			NextUploadIDMarker: opt(), Prefix: opt(), Delimiter: opt(), MaxUploads: r.IntN(1001), EncodingType: opt(), IsTruncated: r.IntN(2) == 0}
		for range r.IntN(3) {
			lu.Uploads = append(lu.Uploads, uploadXML{Key: s(), UploadID: s(), Initiator: ow(), Owner: ow(), StorageClass: s(), Initiated: s()})
		}
		for range r.IntN(3) {
			lu.CommonPrefixes = append(lu.CommonPrefixes, commonPrefix{s()})
		}
		docs = append(docs, lu)

		lp := &listPartsResult{Xmlns: s3NS, Bucket: s(), Key: s(), UploadID: s(), PartNumberMarker: r.IntN(10001),
			NextPartNumberMarker: r.IntN(10001), MaxParts: r.IntN(1001), IsTruncated: r.IntN(2) == 0, Initiator: ow(), Owner: ow(),
			StorageClass: s(), ChecksumAlgorithm: opt(), ChecksumType: opt()}
		for range r.IntN(3) {
			lp.Parts = append(lp.Parts, partXML{PartNumber: r.IntN(10001), LastModified: s(), ETag: s(), Size: r.Int64N(1 << 40),
				copyChecksums: copyChecksums{opt(), opt(), opt(), opt(), opt()}})
		}
		docs = append(docs, lp)

		for _, d := range docs {
			want, got := marshalRef(t, d), written(d)
			if !bytes.Equal(got, want) {
				t.Fatalf("document %d (%T) differs:\n got %q\nwant %q", i, d, got, want)
			}
		}
	}
}

// TestXMLWriterEscapes pins the escaping of the specials and of what XML
// 1.0 cannot carry, whatever encoding/xml does.
func TestXMLWriterEscapes(t *testing.T) {
	for in, want := range map[string]string{
		`a&b<c>d"e'f`:        "a&amp;b&lt;c&gt;d&#34;e&#39;f",
		"t\tn\nr\r":          "t&#x9;n&#xA;r&#xD;",
		"nul\x00ctl\x01\x1f": "nul\uFFFDctl\uFFFD\uFFFD",
		"bad\xffutf8":        "bad\uFFFDutf8",
		"日本 \U0001F600":      "日本 \U0001F600",
		"\uFFFE\uFFFF":       "\uFFFD\uFFFD",
	} {
		w := &xmlWriter{}
		w.text(in)
		if string(w.b) != want {
			t.Errorf("text(%q) = %q, want %q", in, w.b, want)
		}
	}
}

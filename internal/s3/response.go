package s3

import (
	"encoding/xml"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

const s3NS = "http://s3.amazonaws.com/doc/2006-03-01/"

// writeXML sends v as an XML document with status.
func writeXML(w http.ResponseWriter, status int, v any) {
	b, err := xml.Marshal(v)
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", itoa(int64(len(xml.Header)+len(b))))
	w.WriteHeader(status)
	io.WriteString(w, xml.Header)
	w.Write(b)
}

// maxXMLBody bounds request documents (DeleteObjects with 1000 long keys
// is the largest legitimate one).
const maxXMLBody = 4 << 20

// readXML decodes a request document into v; anything malformed is
// MalformedXML. The body is read to its end so that its signature is
// checked.
func readXML(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxXMLBody+1))
	if err != nil {
		return err
	}
	if len(b) > maxXMLBody {
		return errMalformedXML
	}
	if err := xml.Unmarshal(b, v); err != nil {
		return errMalformedXML
	}
	return nil
}

func isoTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func quote(etag string) string { return `"` + etag + `"` }

// encoder applies encoding-type=url to keys in listings.
type encoder bool

func (e encoder) enc(s string) string {
	if !e {
		return s
	}
	// Percent-encoding as S3 does it: a space is %20 (QueryEscape's '+'
	// would read as a literal '+' to clients that decode with
	// PathUnescape; a literal '+' is %2B either way), '/' stays.
	return strings.ReplaceAll(strings.ReplaceAll(url.QueryEscape(s), "+", "%20"), "%2F", "/")
}

type owner struct {
	ID          string
	DisplayName string
}

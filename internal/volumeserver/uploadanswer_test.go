package volumeserver

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

// The hand-written upload answer is byte for byte writeJSON's.
func TestUploadAnswerSameAsJSON(t *testing.T) {
	for _, ans := range []uploadResponse{
		{Size: 1024, ETag: "a1b2c3d4"},
		{Size: 0, ETag: "00000000"},
		{Size: 1 << 40, ETag: ""},
		{Size: 5, ETag: `a"b`}, {Size: 5, ETag: `a\b`}, {Size: 5, ETag: "a<b"}, {Size: 5, ETag: "a>b"}, {Size: 5, ETag: "a&b"},
		{Size: 5, ETag: "a\x7fb"},
		{Size: 5, ETag: "é\x01"},
		{Name: "report one.pdf", Size: 36, ETag: "0badf00d"},
		{Name: "<script>", Size: 1, ETag: "x"},
	} {
		want, got := httptest.NewRecorder(), httptest.NewRecorder()
		writeJSON(want, http.StatusCreated, ans)
		writeUploadAnswer(got, ans)
		if got.Code != want.Code || got.Body.String() != want.Body.String() || !reflect.DeepEqual(got.Header(), want.Header()) {
			t.Errorf("%+v:\n got %d %v %q\nwant %d %v %q", ans, got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
		}
	}
}

package client

import (
	"encoding/json"
	"testing"
)

func TestDecodeAssignAnswer(t *testing.T) {
	cases := []struct {
		in   string
		want assignAnswer
		err  bool
	}{
		{`{"fid":"3,01637037d6","url":"h:1","publicUrl":"p:2","count":1}`,
			assignAnswer{FID: "3,01637037d6", URL: "h:1", PublicURL: "p:2", Count: 1}, false},
		{" {\n \"count\" : 7 , \"fid\":\"1,1aaaaaaaa\", \"extra\": true, \"n\": null, \"f\": -1.5e3 }\n",
			assignAnswer{FID: "1,1aaaaaaaa", Count: 7}, false},
		// Escapes and nesting go through encoding/json.
		{`{"fid":"3,01637037d6","url":"h\u003a1","more":{"a":[1,2]}}`,
			assignAnswer{FID: "3,01637037d6", URL: "h:1"}, false},
		{`{"error":"no writable volume"}`, assignAnswer{Error: "no writable volume"}, false},
		{`{}`, assignAnswer{}, false},
		{`{"count":"7"}`, assignAnswer{}, true},
		{`{"fid":"x"`, assignAnswer{}, true},
		{`{"fid":"x"}garbage`, assignAnswer{}, true},
		{`[]`, assignAnswer{}, true},
		{``, assignAnswer{}, true},
	}
	for _, c := range cases {
		var got assignAnswer
		err := decodeAssignAnswer([]byte(c.in), &got)
		if (err != nil) != c.err || (!c.err && got != c.want) {
			t.Errorf("decode(%q) = %+v, %v; want %+v, err %v", c.in, got, err, c.want, c.err)
		}
	}
}

func TestDecodeUploadAndErrorAnswers(t *testing.T) {
	var u uploadAnswer
	if err := decodeUploadAnswer([]byte(`{"name":"a.txt","size":12,"eTag":"deadbeef"}`), &u); err != nil ||
		u != (uploadAnswer{Name: "a.txt", Size: 12, ETag: "deadbeef"}) {
		t.Fatalf("upload answer %+v, %v", u, err)
	}
	var e errorAnswer
	if !decodeErrorAnswer([]byte(`{"error":"not leader","leader":"m2:9333"}`), &e) ||
		e != (errorAnswer{Error: "not leader", Leader: "m2:9333"}) {
		t.Fatalf("error answer %+v", e)
	}
	e = errorAnswer{}
	if decodeErrorAnswer([]byte("<html>502 Bad Gateway</html>"), &e) {
		t.Fatal("HTML accepted as an error answer")
	}
}

// The fast path must agree with encoding/json whenever both accept the input.
func FuzzDecodeAssignAnswer(f *testing.F) {
	f.Add(`{"fid":"3,01637037d6","url":"h:1","publicUrl":"p:2","count":1}`)
	f.Add(`{"count":18446744073709551615,"url":""}`)
	f.Add(`{"fid":"a\"b","x":[1]}`)
	f.Add(`{"fid":1}`)
	f.Fuzz(func(t *testing.T, in string) {
		var fast, slow assignAnswer
		errFast := decodeAssignAnswer([]byte(in), &fast)
		errSlow := json.Unmarshal([]byte(in), &slow)
		if errSlow == nil && (errFast != nil || fast != slow) {
			t.Fatalf("input %q: fast %+v, %v; encoding/json %+v", in, fast, errFast, slow)
		}
		if errSlow != nil && errFast == nil && json.Valid([]byte(in)) {
			t.Fatalf("input %q: fast path accepted what encoding/json refused: %v", in, errSlow)
		}
	})
}

package auth

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/fid"
)

// FuzzDecodeFast: whatever the reflection-free claims decoder takes, it
// takes as encoding/json does (what it does not take goes to
// encoding/json). Its seeds run with the package's tests.
func FuzzDecodeFast(f *testing.F) {
	for _, s := range []string{
		`{"fid":"3,0100deadbeef","exp":1700000000}`,
		`{"fid":"3,0100deadbeef","n":4,"exp":1700000000}`,
		`{"srv":true,"exp":1700000000}`,
		`{"srv":false,"exp":-1,"nbf":0}`,
		` { "fid" : "x" , "exp" : 1 } `,
		`{"fid":"a","fid":"b","exp":1}`,
		`{"FID":"a","exp":1}`,
		`{"fid":"a\u0062","exp":1}`,
		`{"fid":"a","exp":1.5}`,
		`{"fid":"a","exp":1e3}`,
		`{"fid":"a","exp":01}`,
		`{"fid":"a","exp":"1"}`,
		`{"fid":"a","n":-1,"exp":1}`,
		`{"fid":"a","n":18446744073709551616,"exp":1}`,
		`{"fid":"a","exp":1,"x":{"y":1}}`,
		`{"fid":"a","exp":null}`,
		`{"srv":"true","exp":1}`,
		`{"fid":"a","exp":1}x`,
		`{"fid":"a","exp":1,}`,
		`{}`,
		`[]`,
		`{"fid":"é","exp":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		var fast, ref fileClaims
		if fast.decodeFast(p) {
			if err := json.Unmarshal(p, &ref); err != nil {
				t.Fatalf("%q: fast decoder took what encoding/json refuses: %v", p, err)
			}
			if !reflect.DeepEqual(fast, ref) {
				t.Fatalf("%q: fast %+v, encoding/json %+v", p, fast, ref)
			}
		}
		var sfast, sref serverClaims
		if sfast.decodeFast(p) {
			if err := json.Unmarshal(p, &sref); err != nil {
				t.Fatalf("%q: fast decoder took what encoding/json refuses: %v", p, err)
			}
			if !reflect.DeepEqual(sfast, sref) {
				t.Fatalf("%q: fast %+v, encoding/json %+v", p, sfast, sref)
			}
		}
	})
}

// BenchmarkWriteCheck is a volume server's check of a write's token:
// tried as a server token first (refused), then as the file's token.
func BenchmarkWriteCheck(b *testing.B) {
	s := NewSigner("bench-key", time.Minute)
	id := fid.FileID{Volume: 1, Key: 42, Cookie: 7}
	tok := s.Sign(id, 1)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if s.VerifyServer(tok) == nil {
			b.Fatal("a file token passed as a server token")
		}
		if err := s.Verify(tok, id); err != nil {
			b.Fatal(err)
		}
	}
}

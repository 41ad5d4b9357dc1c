package volume

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/kelpfs/kelp/internal/needle"
	"github.com/kelpfs/kelp/internal/vfs"
)

func testConfig(fsys vfs.FS) Config {
	return Config{FS: fsys, Dir: "/data", ID: 7, Collection: "pics", CheckpointInterval: -1}
}

func create(t testing.TB, cfg Config) *Volume {
	t.Helper()
	v, err := Create(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func open(t testing.TB, cfg Config) *Volume {
	t.Helper()
	v, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func payload(key uint64, gen, size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(uint64(i)*31 + key*7 + uint64(gen)*13)
	}
	return b
}

func put(t testing.TB, v *Volume, key uint64, cookie uint32, data []byte) WriteResult {
	t.Helper()
	res, err := v.Write(context.Background(), needle.Meta{Key: key, Cookie: cookie, Name: fmt.Sprint("f", key)}, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("write %x: %v", key, err)
	}
	return res
}

func get(v *Volume, key uint64, cookie uint32) ([]byte, error) {
	o, err := v.Read(key, cookie)
	if err != nil {
		return nil, err
	}
	defer o.Close()
	return io.ReadAll(o)
}

func mustGet(t testing.TB, v *Volume, key uint64, cookie uint32, want []byte) {
	t.Helper()
	got, err := get(v, key, cookie)
	if err != nil {
		t.Fatalf("read %x: %v", key, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %x: %d bytes differ from the %d written", key, len(got), len(want))
	}
}

func mustErr(t testing.TB, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
}

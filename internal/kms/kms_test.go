package kms

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/kelpfs/kelp/internal/sse"
)

func TestKeysSealAndLifecycle(t *testing.T) {
	dir := t.TempDir()
	master := sse.NewKey()
	s, err := Open(dir, master)
	if err != nil {
		t.Fatal(err)
	}
	k, err := s.Create("photos", "for photos")
	if err != nil || k.Alias != "alias/photos" || !k.Enabled {
		t.Fatalf("Create: %+v %v", k, err)
	}
	if _, err := s.Create("aws/s3", ""); !errors.Is(err, ErrInvalidAlias) {
		t.Fatalf("reserved alias: %v", err)
	}
	if _, err := s.Create("photos", ""); !errors.Is(err, ErrAliasExists) {
		t.Fatalf("second alias: %v", err)
	}
	dk := sse.NewKey()
	id, sealed, err := s.Seal("alias/photos", dk, []byte(`{"a":"b"}`))
	if err != nil || id != k.ID {
		t.Fatalf("Seal: %s %v", id, err)
	}
	if got, err := s.Unseal("arn:aws:kms:us-east-1:000000000000:key/"+id, sealed, []byte(`{"a":"b"}`)); err != nil || !bytes.Equal(got, dk) {
		t.Fatalf("Unseal: %v", err)
	}
	if _, err := s.Unseal(id, sealed, []byte(`{"a":"c"}`)); !errors.Is(err, ErrInvalidCiphertext) {
		t.Fatalf("Unseal with another context: %v", err)
	}
	// Another process (kelp kms) disables the key: the running service sees it.
	other, err := Open(dir, master)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.SetEnabled(id, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Unseal(id, sealed, []byte(`{"a":"b"}`)); !errors.Is(err, ErrDisabled) {
		t.Fatalf("Unseal under a disabled key: %v", err)
	}
	if _, _, err := s.Seal("alias/nope", dk, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown key: %v", err)
	}
	def, err := s.DefaultKey()
	if err != nil || def.Alias != DefaultAlias {
		t.Fatalf("DefaultKey: %+v %v", def, err)
	}
	if again, _ := other.DefaultKey(); again.ID != def.ID {
		t.Fatalf("a second default key %s, want %s", again.ID, def.ID)
	}
	list, err := s.List()
	if err != nil || len(list) != 2 {
		t.Fatalf("List: %+v %v", list, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "keys.json"))
	if bytes.Contains(b, s.plain[id]) {
		t.Fatal("key material in the clear in keys.json")
	}
	if _, err := Open(dir, sse.NewKey()); err == nil {
		t.Fatal("Open with another master key succeeded")
	}
}

func TestEnsureMasterKey(t *testing.T) {
	p := filepath.Join(t.TempDir(), "kms", "master.key")
	k1, created, err := EnsureMasterKey(p)
	if err != nil || !created {
		t.Fatalf("first: %v %v", created, err)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", st.Mode().Perm())
	}
	k2, created, err := EnsureMasterKey(p)
	if err != nil || created || !bytes.Equal(k1, k2) {
		t.Fatalf("second: %v %v", created, err)
	}
}

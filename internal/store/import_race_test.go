package store

import (
	"io"
	"sync"
	"testing"

	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/ttl"
	"github.com/kelpfs/kelp/internal/vfs"
)

// TestImportDuringSizeLimitChange imports a volume while the master's size
// limit changes (every heartbeat may set it): under -race this caught Import
// reading the limit without the store's lock.
func TestImportDuringSizeLimitChange(t *testing.T) {
	s := newStore(t, vfs.NewMem(), make(changes, 1))
	defer s.Close()
	if err := s.Allocate(1, "", replication.Must("000"), ttl.TTL{}); err != nil {
		t.Fatal(err)
	}
	if err := write(t, s, 1, 7, []byte("copied")); err != nil {
		t.Fatal(err)
	}
	src, _ := s.Volume(1)
	r, size, release, err := src.OpenData()
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for limit := int64(1 << 20); ; limit++ {
			select {
			case <-stop:
				return
			default:
				s.SetVolumeSizeLimit(limit)
			}
		}
	}()
	err = s.Import(t.Context(), 2, "", func(w io.Writer) error {
		_, err := io.Copy(w, io.NewSectionReader(r, 0, size))
		return err
	})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Volume(2); !ok {
		t.Fatal("imported volume missing")
	}
}

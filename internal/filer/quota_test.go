package filer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

func wantQuota(t *testing.T, f *Filer, dir string, bytes, files int64) {
	t.Helper()
	q, err := f.GetQuota(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if q.UsedBytes != bytes || q.UsedFiles != files {
		t.Fatalf("quota %s: used %d bytes %d files, want %d and %d", dir, q.UsedBytes, q.UsedFiles, bytes, files)
	}
}

func TestQuotaBytesAndFiles(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Config{})
	e.write(t, "/v/old.txt", []byte("12345"))
	q, err := e.f.SetQuota(ctx, "/v", 20, 4)
	if err != nil {
		t.Fatal(err)
	}
	if q.UsedBytes != 5 || q.UsedFiles != 1 {
		t.Fatalf("usage counted at set: %+v", q)
	}
	e.write(t, "/v/sub/a", []byte("0123456789")) // sub + a: 3 files, 15 bytes
	wantQuota(t, e.f, "/v", 15, 3)
	// 6 more bytes pass 20: refused, nothing changed.
	_, err = e.f.WriteFile(ctx, "/v/b", bytes.NewReader([]byte("abcdef")), WriteOptions{})
	if !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("write past the byte limit: %v", err)
	}
	if _, err := e.f.FindEntry(ctx, "/v/b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("refused file exists: %v", err)
	}
	wantQuota(t, e.f, "/v", 15, 3)
	// Exactly to the limit is fine; then the file limit (4) refuses a fifth entry.
	e.write(t, "/v/b", []byte("abcde"))
	wantQuota(t, e.f, "/v", 20, 4)
	if err := e.f.Mkdir(ctx, "/v/d", 0o755, false); !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("mkdir past the file limit: %v", err)
	}
	// Overwrite with a smaller file, truncate, delete: usage follows.
	e.write(t, "/v/b", []byte("ab"))
	wantQuota(t, e.f, "/v", 17, 4)
	if _, err := e.f.Truncate(ctx, "/v/sub/a", 4); err != nil {
		t.Fatal(err)
	}
	wantQuota(t, e.f, "/v", 11, 4)
	if _, err := e.f.Truncate(ctx, "/v/sub/a", 100); !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("truncate up past the limit: %v", err)
	}
	if err := e.f.DeleteEntry(ctx, "/v/sub", true); err != nil {
		t.Fatal(err)
	}
	wantQuota(t, e.f, "/v", 7, 2)
	// Appends and offset writes count too.
	if _, err := e.f.Append(ctx, "/v/b", bytes.NewReader([]byte("xyz")), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	wantQuota(t, e.f, "/v", 10, 2)
	if _, err := e.f.WriteAt(ctx, "/v/b", 30, bytes.NewReader([]byte("x")), WriteOptions{}); !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("offset write past the limit: %v", err)
	}
	// Outside the quota nothing is limited.
	e.write(t, "/other/big", make([]byte, 100))
	wantQuota(t, e.f, "/v", 10, 2)
	// Lowering the limit below usage keeps the data; growth is refused, shrinking allowed.
	if _, err := e.f.SetQuota(ctx, "/v", 5, 0); err != nil {
		t.Fatal(err)
	}
	if got := e.read(t, "/v/b"); string(got) != "abxyz" {
		t.Fatalf("data after lowering the quota: %q", got)
	}
	e.write(t, "/v/b", []byte("a"))
	wantQuota(t, e.f, "/v", 6, 2)
}

func TestQuotaRenameAndDelete(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Config{})
	if err := e.f.Mkdir(ctx, "/a", 0o755, false); err != nil {
		t.Fatal(err)
	}
	if err := e.f.Mkdir(ctx, "/b", 0o755, false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.f.SetQuota(ctx, "/a", 100, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.f.SetQuota(ctx, "/b", 10, 0); err != nil {
		t.Fatal(err)
	}
	e.write(t, "/a/d/f1", []byte("0123456789"))
	e.write(t, "/a/d/f2", []byte("01234"))
	wantQuota(t, e.f, "/a", 15, 3)
	// Moving a directory into /b would pass its limit.
	if err := e.f.Rename(ctx, "/a/d", "/b/d"); !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("rename into a full quota: %v", err)
	}
	if err := e.f.Rename(ctx, "/a/d/f2", "/b/f2"); err != nil {
		t.Fatal(err)
	}
	wantQuota(t, e.f, "/a", 10, 2)
	wantQuota(t, e.f, "/b", 5, 1)
	if err := e.f.Rename(ctx, "/a/d", "/a/e"); err != nil { // within one quota
		t.Fatal(err)
	}
	wantQuota(t, e.f, "/a", 10, 2)
	if err := e.f.Rename(ctx, "/a", "/c"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("rename of a quota directory: %v", err)
	}
	if err := e.f.DeleteEntry(ctx, "/a", true); err != nil {
		t.Fatal(err)
	}
	if _, err := e.f.GetQuota(ctx, "/a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("quota of a deleted directory: %v", err)
	}
	// A new directory at the same path starts without a quota.
	e.write(t, "/a/x", make([]byte, 1000))
	qs, err := e.f.ListQuotas(ctx, "/")
	if err != nil || len(qs) != 1 || qs[0].Path != "/b" {
		t.Fatalf("ListQuotas: %v %+v", err, qs)
	}
	if err := e.f.RemoveQuota(ctx, "/b"); err != nil {
		t.Fatal(err)
	}
	e.write(t, "/b/big", make([]byte, 1000))
	if _, err := e.f.SetQuota(ctx, "/", 1, 1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("quota on the root: %v", err)
	}
	if _, err := e.f.SetQuota(ctx, "/b/big", 1, 1); !errors.Is(err, ErrNotDir) {
		t.Fatalf("quota on a file: %v", err)
	}
}

func TestQuotaSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Config{})
	if err := e.f.Mkdir(ctx, "/v", 0o755, false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.f.SetQuota(ctx, "/v", 10, 0); err != nil {
		t.Fatal(err)
	}
	e.write(t, "/v/a", []byte("123456"))
	e.restart(t, Config{})
	wantQuota(t, e.f, "/v", 6, 1)
	if _, err := e.f.WriteFile(ctx, "/v/b", bytes.NewReader([]byte("12345")), WriteOptions{}); !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("after restart: %v", err)
	}
}

// Concurrent writers never pass the limit together, and the counter
// matches what is stored.
func TestQuotaConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Config{})
	if err := e.f.Mkdir(ctx, "/v", 0o755, false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.f.SetQuota(ctx, "/v", 0, 25); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, refused := 0, 0
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				_, err := e.f.WriteFile(ctx, fmt.Sprintf("/v/w%d-%d", w, i), bytes.NewReader([]byte("abc")), WriteOptions{})
				mu.Lock()
				switch {
				case err == nil:
					ok++
				case errors.Is(err, ErrQuotaExceeded):
					refused++
				default:
					t.Error(err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if ok != 25 || refused != 15 {
		t.Fatalf("%d writes succeeded and %d were refused, want 25 and 15", ok, refused)
	}
	wantQuota(t, e.f, "/v", 75, 25)
}

// A write whose announced size passes the quota is refused before any
// chunk is uploaded.
func TestQuotaPrecheckUploadsNothing(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Config{})
	if err := e.f.Mkdir(ctx, "/v", 0o755, false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.f.SetQuota(ctx, "/v", 100, 0); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 200)
	_, err := e.f.WriteFile(ctx, "/v/big", bytes.NewReader(data), WriteOptions{SizeHint: int64(len(data))})
	if !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("write past the quota: %v", err)
	}
	if live := e.blobs.Live(); len(live) != 0 {
		t.Fatalf("blobs uploaded for a refused write: %v", live)
	}
}

// BenchmarkQuotaCreates measures what a quota costs a create: entries
// created per second below a directory without and with a quota.
func BenchmarkQuotaCreates(b *testing.B) {
	for _, withQuota := range []bool{false, true} {
		name := "no-quota"
		if withQuota {
			name = "quota"
		}
		b.Run(name, func(b *testing.B) {
			e := newEnv(b, Config{})
			ctx := context.Background()
			if err := e.f.Mkdir(ctx, "/v/a/b", 0o755, false); err != nil {
				b.Fatal(err)
			}
			if withQuota {
				if _, err := e.f.SetQuota(ctx, "/v", 1<<40, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := e.f.CreateEntry(ctx, &Entry{Path: fmt.Sprintf("/v/a/b/f%d", i), Mode: 0o644, Size: 10}, CreateOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
		})
	}
}

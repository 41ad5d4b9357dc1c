package volumeserver

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLocalReadGivesReadOnlyFiles: the descriptor a local reader receives
// cannot write the volume file, though the volume holds it open for writing.
func TestLocalReadGivesReadOnlyFiles(t *testing.T) {
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "1.dat"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString("needle")
	ro, err := reopenReadOnly(f)
	if err != nil {
		t.Skipf("no /proc/self/fd here: %v", err)
	}
	defer ro.Close()
	if _, err := ro.WriteAt([]byte("x"), 0); err == nil {
		t.Fatal("the reopened file is writable")
	}
	b := make([]byte, 6)
	if _, err := ro.ReadAt(b, 0); err != nil || string(b) != "needle" {
		t.Fatalf("read %q, %v", b, err)
	}
	if _, err := reopenReadOnly(struct{}{}); err == nil {
		t.Fatal("reopenReadOnly took a value that is no OS file")
	}
}

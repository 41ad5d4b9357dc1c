package benchmark

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/kelpfs/kelp/internal/fid"
)

// The file list of --save / --reads-from: a header line, then one line per
// file written successfully, "<fid> <crc32c hex>":
//
//	kelp-benchmark-files size=1024
//	3,01637037d6 8f2a11c0

const filesHeader = "kelp-benchmark-files"

func saveFiles(path string, size int, files []written) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s size=%d\n", filesHeader, size)
	for _, f := range files {
		if f.ok {
			fmt.Fprintf(&b, "%s %08x\n", f.id, f.crc)
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("benchmark: save the file list: %w", err)
	}
	return nil
}

func loadFiles(path string) ([]written, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	bad := func(line int, why string) error {
		return fmt.Errorf("%w: %s line %d: %s (want a list written by --save)", ErrConfig, path, line, why)
	}
	if !sc.Scan() {
		return nil, 0, bad(1, "empty")
	}
	head, sizeText, ok := strings.Cut(sc.Text(), " size=")
	size, err := strconv.Atoi(sizeText)
	if !ok || head != filesHeader || err != nil || size < 0 {
		return nil, 0, bad(1, "bad header")
	}
	var out []written
	for line := 2; sc.Scan(); line++ {
		idText, crcText, ok := strings.Cut(sc.Text(), " ")
		id, err1 := fid.Parse(idText)
		crc, err2 := strconv.ParseUint(crcText, 16, 32)
		if !ok || err1 != nil || err2 != nil {
			return nil, 0, bad(line, "want <fid> <crc>")
		}
		out = append(out, written{id: id, crc: uint32(crc), ok: true})
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("%w: %s: %w", ErrConfig, path, err)
	}
	if len(out) == 0 {
		return nil, 0, bad(2, "no file")
	}
	return out, size, nil
}

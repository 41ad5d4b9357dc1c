package volumeserver

import "testing"

func TestReadsToEnd(t *testing.T) {
	const size = 1000
	for rng, want := range map[string]bool{
		"":              true,
		"bytes=0-":      true,
		"bytes=0-999":   true,
		"bytes=0-5000":  true,
		"bytes=0-998":   false,
		"bytes=1-":      false,
		"bytes=-1000":   false, // a suffix is checked as a range: not worth the parse
		"bytes=0-1,5-9": false,
		"bytes=0-x":     false,
		"items=0-":      false,
	} {
		if got := readsToEnd(rng, size); got != want {
			t.Errorf("readsToEnd(%q, %d) = %v, want %v", rng, size, got, want)
		}
	}
}

package objectapi

import (
	"testing"
	"time"
)

// If-Unmodified-Since compares to the second: an object written within
// the date's second was not modified after it.
func TestConditionalModifiedAfter(t *testing.T) {
	date := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		mtime, since time.Time
		want         bool
	}{
		{date.Add(700 * time.Millisecond), date, false},
		{date, date, false},
		{date.Add(time.Second), date, true},
		{date.Add(-time.Hour), date, false},
		{date.Add(time.Hour), time.Time{}, false}, // absent condition
	}
	for _, tc := range cases {
		if got := modifiedAfter(tc.mtime, tc.since); got != tc.want {
			t.Errorf("modifiedAfter(%s, %s) = %v, want %v", tc.mtime, tc.since, got, tc.want)
		}
	}
}

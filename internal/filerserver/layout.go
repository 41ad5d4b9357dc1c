package filerserver

import (
	"context"
	"fmt"
	"net/url"

	"github.com/kelpfs/kelp/internal/replication"
)

// A write may choose where its new chunks go: ?replication=XYZ and
// ?collection=NAME are passed to the master's assign for every chunk the
// request stores (the filer's own --replication and --collection otherwise).
// Chunks a file already has keep theirs: an append or a write at an offset
// places only the chunks it writes. ?ttl= is refused: the namespace has no
// expiry, so a chunk in a TTL volume would vanish under a file that still
// lists it. Requests that store no data (mkdir, rename) refuse all three
// rather than ignore them.

// chunkLayout is the collection and replication a request asked for; empty
// fields leave the filer's defaults.
type chunkLayout struct {
	Collection  string
	Replication string
}

// maxCollectionLen bounds a collection name, which becomes part of volume
// file names.
const maxCollectionLen = 128

// parseChunkLayout reads and checks ?collection=, ?replication= and ?ttl=.
// A bad value is an errBadRequest that names the parameter.
func parseChunkLayout(q url.Values) (chunkLayout, error) {
	if _, ok := q["ttl"]; ok {
		return chunkLayout{}, fmt.Errorf("%w: ttl is not supported by the filer (files do not expire); write without ?ttl=", errBadRequest)
	}
	var l chunkLayout
	if v, ok := q["replication"]; ok {
		if _, err := replication.Parse(v[0]); err != nil || v[0] == "" {
			return chunkLayout{}, fmt.Errorf("%w: replication %q is not a code XYZ of three digits (000, 001, 010, 100, 200, ...)", errBadRequest, v[0])
		}
		l.Replication = v[0]
	}
	if v, ok := q["collection"]; ok {
		if err := checkCollection(v[0]); err != nil {
			return chunkLayout{}, err
		}
		l.Collection = v[0]
	}
	return l, nil
}

// checkCollection allows 1 to 128 letters, digits, '.', '-' and '_', not
// "." or "..": the name becomes part of volume file names.
func checkCollection(s string) error {
	bad := s == "" || s == "." || s == ".." || len(s) > maxCollectionLen
	for i := 0; i < len(s) && !bad; i++ {
		c := s[i]
		bad = !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_')
	}
	if bad {
		return fmt.Errorf("%w: collection %q must be 1 to %d letters, digits, '.', '-' or '_'", errBadRequest, s, maxCollectionLen)
	}
	return nil
}

// refuseChunkLayout is for requests that store no data: the layout
// parameters would mean nothing there.
func refuseChunkLayout(q url.Values, op string) error {
	for _, k := range []string{"replication", "collection", "ttl"} {
		if _, ok := q[k]; ok {
			return fmt.Errorf("%w: ?%s= applies to written data; op=%s writes none", errBadRequest, k, op)
		}
	}
	return nil
}

type chunkLayoutKey struct{}

// withChunkLayout makes the chunks stored under ctx go where l says.
func withChunkLayout(ctx context.Context, l chunkLayout) context.Context {
	if l == (chunkLayout{}) {
		return ctx
	}
	return context.WithValue(ctx, chunkLayoutKey{}, l)
}

// chunkLayoutFrom returns the layout withChunkLayout put in ctx.
func chunkLayoutFrom(ctx context.Context) (chunkLayout, bool) {
	l, ok := ctx.Value(chunkLayoutKey{}).(chunkLayout)
	return l, ok
}

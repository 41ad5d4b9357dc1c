package chunk

import "context"

// A read is authenticated when its reader checks every byte it gets with
// AES-GCM: a sealed chunk here (crypt.go), an SSE object's ciphertext in
// objectapi. Then the store's own checksum pass over the same bytes (the
// volume server's CRC of a whole needle) only costs CPU: a changed byte
// fails the reader's tag check all the same, and the answer ends as short
// as the store's check would have ended it. Opener implementations may pass
// the mark on (the cluster's, through client.Get, to the volume server).

type authenticatedKey struct{}

// Authenticated marks reads made under the returned context as
// authenticated by their reader.
func Authenticated(ctx context.Context) context.Context {
	return context.WithValue(ctx, authenticatedKey{}, true)
}

// IsAuthenticated reports whether reads under ctx are authenticated by
// their reader.
func IsAuthenticated(ctx context.Context) bool {
	v, _ := ctx.Value(authenticatedKey{}).(bool)
	return v
}

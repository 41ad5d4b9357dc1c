// Package filerserver is the filer's network edge: the HTTP API (files,
// directory listings, mkdir, rename, append) and the gRPC API (filer.proto)
// over one filer.Filer, its metadata store (embedded Pebble, PostgreSQL or
// Redis) and the cluster's volume servers, reached through internal/client.
//
// It owns the mapping from filer errors to HTTP and gRPC codes (errors.go,
// the one table), the conversion between filer entries and wire types
// (convert.go) and the adapter that makes internal/client the filer's blob
// layer (blobs.go). The HTTP API is documented in docs/filer.md.
//
// Imported by internal/cli (kelp filer, kelp server) and tests. It defines
// no on-disk format: package filer owns the key layout in the store.
package filerserver

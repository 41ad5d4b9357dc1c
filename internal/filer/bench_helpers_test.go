package filer

import (
	"sync/atomic"

	"github.com/kelpfs/kelp/internal/filer/store"
	"github.com/kelpfs/kelp/internal/filer/store/pebble"
)

func atomicAdd(p *int64) int64 { return atomic.AddInt64(p, 1) }

func openPebbleSync(dir string) (store.Store, error) { return pebble.Open(dir, nil) }

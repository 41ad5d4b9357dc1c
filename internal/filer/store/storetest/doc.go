// Package storetest is the conformance suite every store.Store backend
// passes, in the manner of testing/fstest: a backend's test describes how to
// make a fresh namespace and open instances on it, and calls Run (and
// Benchmark for figures).
//
// It owns no format. Imported only by the backends' _test files.
package storetest

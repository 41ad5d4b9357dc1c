//go:build race

package webdav

// raceBuild: the race detector slows the server several times over.
const raceBuild = true

//go:build !race

package webdav

const raceBuild = false

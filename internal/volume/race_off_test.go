//go:build !race

package volume

const raceOn = false

//go:build race

package volume

// raceOn: the race detector slows the crash tests about tenfold, so they
// try fewer crash points.
const raceOn = true

//go:build race

package memport_test

// raceEnabled: the race detector slows the conformance suite's frame
// accounting run by two orders of magnitude, so it sends fewer frames.
const raceEnabled = true

package fastpath

import "unsafe"

// prefetch asks the processor to load the cache line of each address in
// lines (PREFETCHT0), without waiting for any: the misses of all of them
// are in flight at once, and none of the lines is read in the sense of the
// memory model (a line another goroutine writes is only brought closer).
// An address that is nil or not mapped faults nowhere.
// Used by the look-aheads of both paths (inahead.go; routeAhead and warm
// in outbound).
//
//go:noescape
func prefetch(lines []unsafe.Pointer)

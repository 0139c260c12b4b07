package fastpath

// prefetch asks the processor to load the cache line of each address in
// lines (PREFETCHT0; addresses as addrOf gives them), without waiting for
// any: the misses of all of them are in flight at once, and none of the
// lines is read in the sense of the memory model (a line another
// goroutine writes is only brought closer). An address that is 0 or not
// mapped faults nowhere. Used by the inbound look-ahead (inahead.go).
// The loop issues four prefetches a turn.
//
//go:noescape
func prefetch(lines []uintptr)

// prefetchL2 is prefetch with PREFETCHT2: each line is brought into the
// L2 (and the levels beyond it), not the L1. The outbound look-ahead
// (routeAhead, warm) issues its hundreds of prefetches a burst with it:
// at 100,000 peers with traffic over 10,000, `go run ./bench/scale -parts
// memory` gave a median ratio 0.784-0.820 against 0.764-0.795 with
// PREFETCHT0, higher in each of 7 alternating rounds on an Intel Xeon
// (docs/performance.md, 3 December 18:04-18:30 UTC): the lines are read
// from the L2 a little later, and the misses of a level are more in
// flight at once.
//
//go:noescape
func prefetchL2(lines []uintptr)

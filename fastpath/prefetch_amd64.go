package fastpath

import "encoding/binary"

// prefetch asks the processor to load the cache line of each address in
// lines (PREFETCHT0; addresses as addrOf gives them), without waiting for
// any: the misses of all of them are in flight at once, and none of the
// lines is read in the sense of the memory model (a line another
// goroutine writes is only brought closer). An address that is 0 or not
// mapped faults nowhere. Used by the inbound look-ahead (inahead.go),
// and by the outbound one on AMD (prefetchAhead). The loop issues four
// prefetches a turn.
//
//go:noescape
func prefetch(lines []uintptr)

// prefetchL2 is prefetch with PREFETCHT2: each line is brought into the
// L2 (and the levels beyond it), not the L1 (for the outbound look-ahead
// on Intel: prefetchAhead).
//
//go:noescape
func prefetchL2(lines []uintptr)

// cpuVendor returns CPUID leaf 0's EBX, EDX and ECX: the processor's
// vendor string, four bytes each, in that order.
//
//go:noescape
func cpuVendor() (b, d, c uint32)

// vendor is the processor's vendor string ("GenuineIntel",
// "AuthenticAMD", ...), as CPUID's leaf 0 gives it.
func vendor() string {
	b, d, c := cpuVendor()
	var v [12]byte
	binary.LittleEndian.PutUint32(v[0:], b)
	binary.LittleEndian.PutUint32(v[4:], d)
	binary.LittleEndian.PutUint32(v[8:], c)
	return string(v[:])
}

// aheadToL1 tells prefetchAhead which instruction the outbound
// look-ahead (routeAhead, warm) issues its hundreds of prefetches a burst
// with, measured both ways at 100,000 peers with traffic over 10,000
// (`go run ./bench/scale -parts memory`, and BenchmarkManyPeers):
//
//   - Intel (Xeon VM, 3 December): PREFETCHT2, into the L2. The median
//     ratio was higher in each of 10 alternating rounds (by 0.018 on
//     average): with PREFETCHT0 the prefetch instructions waited for the
//     L1's miss buffers.
//   - AMD (Zen 5 VM, family 26, 6 December): PREFETCHT0, into the L1.
//     fastpath_100k_vs_1 higher in 3 of 4 alternating runs (median 0.846
//     against 0.825), and BenchmarkManyPeers' extra time a packet lower
//     in 11 of 11 alternating pairs, by about 2 ns of 30.
//
// Other AMD processors take the Zen 5 choice, unmeasured
// (docs/performance.md, 6 December).
var aheadToL1 = vendor() == "AuthenticAMD"

// prefetchAhead is prefetch or prefetchL2, as aheadToL1 says: for the
// outbound look-ahead, once or twice a burst.
func prefetchAhead(lines []uintptr) {
	if aheadToL1 {
		prefetch(lines)
		return
	}
	prefetchL2(lines)
}

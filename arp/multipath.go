package arp

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"net/netip"
)

// Path is one next hop of a multipath route (`ip route add ... nexthop
// via A weight 1 nexthop via B weight 2`, RTA_MULTIPATH): destinations are
// reached through Gateway on the interface IfIndex, or directly when
// Gateway is not valid. Weight is the next hop's share of the destinations
// (1 to 256, the kernel's rtnh_hops + 1).
type Path struct {
	Gateway netip.Addr
	IfIndex int
	Weight  int
}

// multipath is the next hops of a multipath route and, for each, the
// highest destination hash that picks it: hash-threshold (RFC 2992 §2),
// as Linux's fib_select_multipath and fib6_select_path choose among a
// route's next hops by the upper bounds fib_rebalance computes from their
// weights. Immutable once built; Routes share it.
type multipath struct {
	paths  []Path
	bounds []uint32 // bounds[i]: the highest hash that picks paths[i]
}

// newMultipath builds the selection over paths (two or more, each of
// weight 1 or more).
func newMultipath(paths []Path) *multipath {
	m := &multipath{paths: paths, bounds: make([]uint32, len(paths))}
	total := 0
	for _, p := range paths {
		total += p.Weight
	}
	cum := 0
	for i, p := range paths {
		cum += p.Weight
		// The share of the hash space up to and including path i,
		// rounded, less one: the last path's bound is MaxUint32.
		m.bounds[i] = uint32((uint64(cum)<<32+uint64(total)/2)/uint64(total) - 1)
	}
	m.bounds[len(paths)-1] = math.MaxUint32
	return m
}

// pick returns the path that carries traffic to dst.
func (m *multipath) pick(dst netip.Addr) *Path {
	h := pathHash(dst)
	for i, b := range m.bounds {
		if h <= b {
			return &m.paths[i]
		}
	}
	return &m.paths[len(m.paths)-1]
}

// equal reports whether m and o choose alike (nil for a route of one
// next hop).
func (m *multipath) equal(o *multipath) bool {
	if m == nil || o == nil {
		return m == o
	}
	if len(m.paths) != len(o.paths) {
		return false
	}
	for i := range m.paths {
		if m.paths[i] != o.paths[i] {
			return false
		}
	}
	return true
}

// pathSeed keys pathHash, drawn once a process: which next hop of a
// multipath route a destination takes stays the same for as long as the
// gateway runs, over every change of the routes that keeps the route's
// next hops, and differs from one run to the next, as Linux keys its
// multipath hash once a boot (net_get_random_once in fib_multipath_hash
// and rt6_multipath_hash) so that outsiders cannot aim at one next hop.
var pathSeed = rand.Uint64()

// pathHash hashes dst to 32 bits for pick. Linux's default multipath
// hash (fib_multipath_hash_policy 0) takes the source address too; the
// gateway's packets toward one destination leave from one WAN address,
// so the destination alone spreads them the same way: every peer's
// packets by one next hop, the peers over all of them.
func pathHash(dst netip.Addr) uint32 {
	a := dst.As16()
	x := binary.BigEndian.Uint64(a[:8]) ^ pathSeed
	y := binary.BigEndian.Uint64(a[8:])
	// Two rounds of a multiply-xorshift mix (the constants are odd
	// 64-bit numbers with well-spread bits), so that addresses that
	// differ in one low bit land far apart.
	h := (x ^ (y*0x9e3779b97f4a7c15)>>7) * 0xbf58476d1ce4e5b9
	h ^= h >> 31
	h = (h ^ y) * 0x94d049bb133111eb
	h ^= h >> 29
	return uint32(h >> 32)
}

// Paths returns r's next hops when r is a multipath route of the
// kernel's (KernelRoutes: those not dead; Gateway and IfIndex are the
// first's), nil otherwise. The slice is a copy.
func (r Route) Paths() []Path {
	if r.paths == nil {
		return nil
	}
	return append([]Path(nil), r.paths.paths...)
}

// Path returns the next hop that carries traffic to dst by r: the address
// whose MAC a frame to dst must carry (r's gateway, or dst itself when on-
// link) and the interface. A multipath route's next hop is the one dst
// hashes to (hash-threshold by the next hops' weights): every destination
// keeps one next hop for as long as the route's next hops stay, and the
// destinations spread over them by weight, as Linux spreads flows
// (fib_select_multipath, fib6_select_path). Allocates nothing.
func (r Route) Path(dst netip.Addr) (nexthop netip.Addr, ifindex int) {
	if r.paths == nil {
		if r.Gateway.IsValid() {
			return r.Gateway, r.IfIndex
		}
		return dst, r.IfIndex
	}
	p := r.paths.pick(dst)
	if p.Gateway.IsValid() {
		return p.Gateway, p.IfIndex
	}
	return dst, p.IfIndex
}

// equal reports whether r and o are the same route, next hops included.
func (r Route) equal(o Route) bool {
	return r.Prefix == o.Prefix && r.Gateway == o.Gateway && r.IfIndex == o.IfIndex && r.Metric == o.Metric &&
		r.paths.equal(o.paths)
}

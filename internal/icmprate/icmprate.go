// Package icmprate limits the ICMP and ICMPv6 error messages a gateway
// sends, as Linux limits its own (RFC 1812 §4.3.2.8, RFC 4443 §2.4(f)): a
// global token bucket (Linux net.ipv4.icmp_msgs_per_sec = 1000 and
// icmp_msgs_burst = 50) and a per-destination bucket (Linux
// net.ipv4.icmp_ratelimit = 1000 ms, with a burst of 6 as the kernel's
// inet_peer_xrlim_allow allows) for time exceeded and destination
// unreachable. "Fragmentation needed" and "packet too big" are not limited,
// as Linux leaves them out of icmp_ratemask: path MTU discovery must not
// break; callers simply do not ask for them.
//
// A Limiter is shared by every worker of a gateway. It takes no lock: each
// bucket is one atomic word updated by compare-and-swap (a generic cell rate
// algorithm: the word holds the theoretical arrival time of the next
// message, RFC 2697's token bucket expressed in time). The destination
// table is a fixed array of DestSlots slots indexed by a hash of the
// address; a slot holds a 16-bit tag of its address and its bucket, so a
// collision shares or resets one bucket, never grows the table.
package icmprate

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"sync/atomic"
	"time"
)

// Defaults, Linux's (Documentation/networking/ip-sysctl.rst).
const (
	DefaultRate         = 1000        // messages per second, all destinations
	DefaultBurst        = 50          // messages
	DefaultDestInterval = time.Second // between messages to one destination
	// DestBurst is how many messages one destination may get at once
	// before DefaultDestInterval applies (Linux XRLIM_BURST_FACTOR).
	DestBurst = 6
	// DestSlots is the size of the destination table (a power of 2).
	DestSlots = 4096
)

// Config sets a Limiter's rates. A zero field takes its default; a negative
// one turns that limit off.
type Config struct {
	Rate         int           // global messages per second
	Burst        int           // global burst, messages
	DestInterval time.Duration // per-destination interval
}

// Limiter decides whether an ICMP error may be sent. Safe for concurrent
// use; Allow takes no lock and allocates nothing.
type Limiter struct {
	seed       uint64
	globalT    int64 // ns between messages; 0: no global limit
	globalTol  int64 // ns of burst
	destT      int64 // ns between messages to one destination; 0: none
	destTol    int64
	global     atomic.Int64
	dests      [DestSlots]atomic.Uint64 // tag<<48 | TAT in µs since epoch, mod 2^48 (allowDest)
	suppressed atomic.Uint64
	allowed    atomic.Uint64
}

// New returns a Limiter for c.
func New(c Config) *Limiter {
	if c.Rate == 0 {
		c.Rate = DefaultRate
	}
	if c.Burst <= 0 {
		c.Burst = DefaultBurst
	}
	if c.DestInterval == 0 {
		c.DestInterval = DefaultDestInterval
	}
	l := &Limiter{seed: rand.Uint64()}
	if c.Rate > 0 {
		l.globalT = int64(time.Second) / int64(c.Rate)
		l.globalTol = l.globalT * int64(c.Burst-1)
	}
	if c.DestInterval > 0 {
		l.destT = int64(c.DestInterval / time.Microsecond)
		l.destTol = l.destT * (DestBurst - 1)
	}
	return l
}

// Allow reports whether an error to dst may be sent at time now, in ns of a
// monotonic clock that every caller of this Limiter shares (a fast-path
// engine's clock; 0 or later), and counts the message as allowed or
// suppressed. A nil Limiter allows everything.
func (l *Limiter) Allow(dst netip.Addr, now int64) bool {
	return l.AllowShift(dst, now, 0)
}

// AllowShift is Allow with the per-destination interval (and its burst)
// divided by 2^shift: Linux gives an IPv6 destination reached by a route
// of prefix length plen < 128 the interval icmpv6_time >> ((128 -
// plen) >> 5) (icmpv6_xrlim_allow, "give more bandwidth to wider
// prefixes": a /64's 1000 ms becomes 250 ms); Shift6 computes it.
func (l *Limiter) AllowShift(dst netip.Addr, now int64, shift uint) bool {
	if l == nil {
		return true
	}
	t := now
	if l.destT > 0 && !l.allowDest(dst, t/int64(time.Microsecond), shift) {
		l.suppressed.Add(1)
		return false
	}
	if l.globalT > 0 && !gcra(&l.global, t, l.globalT, l.globalTol) {
		l.suppressed.Add(1)
		return false
	}
	l.allowed.Add(1)
	return true
}

// AllowGlobal is Allow for an error to the host itself: the global bucket
// only, as Linux lets an error routed over the loopback through its
// per-destination limit (icmpv4_xrlim_allow, icmpv6_xrlim_allow) but not
// through icmp_global_allow. Counted as Allow counts.
func (l *Limiter) AllowGlobal(now int64) bool {
	if l == nil {
		return true
	}
	if l.globalT > 0 && !gcra(&l.global, now, l.globalT, l.globalTol) {
		l.suppressed.Add(1)
		return false
	}
	l.allowed.Add(1)
	return true
}

// gcra is one conforming-or-not decision of the generic cell rate
// algorithm on the theoretical arrival time in w: a message at t conforms
// when the TAT is no more than tol ahead of t; it then moves the TAT on by
// T.
func gcra(w *atomic.Int64, t, T, tol int64) bool {
	for {
		old := w.Load()
		tat := max(old, t)
		if tat-t > tol {
			return false
		}
		if w.CompareAndSwap(old, tat+T) {
			return true
		}
	}
}

const tatMask = 1<<48 - 1

// Shift6 is AllowShift's shift for an IPv6 destination whose route has
// prefix length plen (0-128), as Linux's icmpv6_xrlim_allow.
func Shift6(plen int) uint {
	if plen >= 128 || plen < 0 {
		return 0
	}
	return uint(128-plen) >> 5
}

func (l *Limiter) allowDest(dst netip.Addr, us int64, shift uint) bool {
	destT, destTol := l.destT>>shift, l.destTol>>shift
	a := dst.As16()
	h := mix(binary.LittleEndian.Uint64(a[0:8])^l.seed, binary.LittleEndian.Uint64(a[8:16]))
	slot := &l.dests[h&(DestSlots-1)]
	tag := h >> 48
	for {
		old := slot.Load()
		// How far the slot's TAT is ahead of now, from the low 48 bits
		// of both, their difference sign-extended: right across the
		// wrap of the stored time (2^48 µs, 8.9 years of the clock),
		// where comparing the stored time with now had every slot
		// look idle from then on, the limit off for good.
		ahead := int64((old&tatMask-uint64(us)&tatMask)<<16) >> 16
		if old>>48 != tag || ahead < 0 {
			ahead = 0 // a new destination, or an idle one
		}
		if ahead > destTol {
			return false
		}
		if slot.CompareAndSwap(old, tag<<48|uint64(us+ahead+destT)&tatMask) {
			return true
		}
	}
}

// Stats returns the messages allowed and suppressed so far.
func (l *Limiter) Stats() (allowed, suppressed uint64) {
	if l == nil {
		return 0, 0
	}
	return l.allowed.Load(), l.suppressed.Load()
}

// mix hashes two words (a keyed splitmix64-style finaliser): enough to
// spread addresses over the table; the random key keeps a sender from
// choosing colliding addresses on purpose.
func mix(a, b uint64) uint64 {
	h := a ^ b*0x9e3779b97f4a7c15
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

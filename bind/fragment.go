package bind

import (
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/outerfrag"
)

// maxFragments bounds the fragments of one datagram: a datagram that
// would need more (a port MTU of a few dozen bytes) is dropped and counted
// as DropTooBig. At an MTU of 576 a 4,096-byte frame's datagram needs 8.
const maxFragments = 64

// MaxFragments is the most fragments the Bind cuts one datagram into
// (maxFragments; tunnelmtu.Limits).
const MaxFragments = maxFragments

// maxGroups bounds the fragmented datagrams in a txQueue's out: each has
// at least two frames.
const maxGroups = (BatchSize + maxFragments) / 2

// fragGroup is where the fragments of one datagram are in a txQueue's out.
type fragGroup struct{ start, n int }

// fragment builds the datagram of payload, longer than the port's MTU,
// into f (a frame of q's batch, a slice of one) and appends its fragments
// to q.out[k:], flushing q.out first when they do not fit behind the k
// frames there, and returns the new end of q.out's frames. short reports
// that the TX pool had no frame for a fragment: the datagram is dropped
// and counted (DropNoBuffer).
//
// The kernel fragments the outer packets of Linux's WireGuard, which
// sets ignore_df on them, and this is what it sends: over IPv4 fragments
// of the datagram with its identification (DF is clear; RFC 791 §3.2,
// header.IPv4Fragmenter); over IPv6 the source's fragments with a Fragment
// header and q's next identification (RFC 8200 §4.5,
// header.IPv6Fragmenter). Fragment 0 is rewritten in f itself (IPv6: 8
// bytes of f's headroom taken in front, the Ethernet header moved there),
// the others are written into frames of q's pool. A datagram longer than
// f, one the fragmenter refuses (an MTU that holds no header and 8 bytes
// of data) or that needs more than maxFragments is dropped and counted as
// DropTooBig. f is given to q.out or freed either way. The caller holds
// q.mu.
func (b *Bind) fragment(q *txQueue, f []dataplane.Frame, payload []byte, t *hdrTemplate, k int) (next int, short bool) {
	if !b.build(&f[0], payload, t, q.ipID+1) {
		return k, q.drop(f, nil, DropTooBig)
	}
	ip := f[0].Data()[header.EthernetLen:]
	var r header.Reason
	var n int
	if t.v4 {
		q.ipID++
		r, n = q.f4.Reset(ip, t.mtu), q.f4.Count()
	} else {
		q.ip6ID++
		r, n = q.f6.Reset(ip, t.mtu, q.ip6ID), q.f6.Count()
	}
	if r != header.OK || n > maxFragments {
		return k, q.drop(f, nil, DropTooBig)
	}
	if k+n > len(q.out) {
		q.flush(k)
		k = 0
	}
	rest := q.out[k+1 : k+n] // fragments 1 to n-1
	if got := q.tx.Alloc(rest); got < len(rest) {
		return k, q.drop(f, rest[:got], DropNoBuffer)
	}
	if !outerfrag.Into(&f[0], rest, header.EthernetLen, !t.v4, &q.f4, &q.f6) {
		return k, q.drop(f, rest, DropTooBig)
	}
	q.out[k] = f[0]
	q.groups[q.ngroups] = fragGroup{start: k, n: n}
	q.ngroups++
	return k + n, false
}

// drop frees f and more, the frames of a datagram not sent, counts it as
// why, and reports whether that was DropNoBuffer.
func (q *txQueue) drop(f, more []dataplane.Frame, why DropReason) bool {
	q.ctr.drops[why].Add(1)
	q.tx.Free(more)
	q.tx.Free(f)
	return why == DropNoBuffer
}

// flush transmits q.out[:k] in order, with up to four tries that reclaim
// completions when the TX ring is full, frees the frames it did not take
// and counts: a datagram sent whole, or every one of whose fragments went
// (then fragmented too), as transmitted; one with a frame left as
// DropTXFull; and the fragment frames that went. It empties q.groups. The
// caller holds q.mu.
func (q *txQueue) flush(k int) {
	frames := q.out[:k]
	sent := 0
	for tries := 0; sent < len(frames) && tries < 4; tries++ {
		m := q.tx.Transmit(frames[sent:])
		if m == 0 {
			q.tx.Reclaim()
		}
		sent += m
	}
	if sent < len(frames) {
		q.tx.Free(frames[sent:])
	}
	// Frames before at are counted; frames[at:g.start] and
	// frames[at:] after the last group were datagrams sent whole.
	var packets, full, fragmented, fragments, at int
	for _, g := range q.groups[:q.ngroups] {
		s := min(max(sent-at, 0), g.start-at)
		packets += s
		full += g.start - at - s
		s = min(max(sent-g.start, 0), g.n)
		fragments += s
		if s == g.n {
			packets++
			fragmented++
		} else {
			full++
		}
		at = g.start + g.n
	}
	if q.ngroups > 0 {
		q.ngroups = 0
		q.ctr.fragmented.Add(uint64(fragmented))
		q.ctr.fragments.Add(uint64(fragments))
	}
	s := min(max(sent-at, 0), len(frames)-at)
	packets += s
	full += len(frames) - at - s
	if full > 0 {
		q.ctr.drops[DropTXFull].Add(uint64(full))
	}
	q.ctr.packets.Add(uint64(packets))
	clear(frames)
}

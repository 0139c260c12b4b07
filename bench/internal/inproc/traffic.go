//go:build linux

package inproc

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync/atomic"

	"github.com/wgpio/wgpio/header"
)

// The inner traffic: flows UDP flows from host A to host B (198.19.0.0/16
// is RFC 2544's benchmarking block, as in the rig).
var (
	hostA = netip.MustParseAddr("198.19.1.10")
	hostB = netip.MustParseAddr("198.19.2.10")
)

const (
	flows     = 64    // inner flows, so that RSS spreads them over queues
	srcPort   = 10000 // flow f's UDP source port is srcPort + f
	dstPort   = 9000
	tunnelMTU = 1420
	// Payload layout: run tag, flow, sequence number, then a pattern that
	// depends on the flow and the byte's position.
	offTag     = 0
	offFlow    = 4
	offSeq     = 8
	offPattern = 16
	ipUDP      = header.IPv4MinLen + header.UDPLen
	// minSize is the smallest inner IPv4 packet the format allows.
	minSize = ipUDP + offPattern
)

// traffic is the inner packets of one size: a template per flow (IPv4
// with a valid header checksum, UDP without a checksum, the pattern), of
// which the generator copies one per packet and stamps tag, flow and
// sequence number, and against which the sink checks every packet.
type traffic struct {
	size  int      // IPv4 total length, bytes
	tmpl  [][]byte // per flow
	seq   []uint64 // generator: next sequence number per flow
	flow  int      // generator: next flow
	tag   uint32   // generator: the step's run tag
	count uint64   // generator: packets filled
}

func newTraffic(size int) (*traffic, error) {
	if size < minSize || size > tunnelMTU {
		return nil, fmt.Errorf("inproc: packet size %d outside [%d, %d]", size, minSize, tunnelMTU)
	}
	t := &traffic{size: size, seq: make([]uint64, flows)}
	for f := range flows {
		b := make([]byte, size)
		fl := header.IPv4Fields{Protocol: header.ProtoUDP, Src: hostA.As4(), Dst: hostB.As4(), DontFragment: true}
		header.PutIPv4(b, &fl, size-header.IPv4MinLen)
		header.PutUDP(b[header.IPv4MinLen:], uint16(srcPort+f), dstPort, size-ipUDP)
		for i := ipUDP + offPattern; i < size; i++ {
			b[i] = byte(f*7 + i)
		}
		t.tmpl = append(t.tmpl, b)
	}
	return t, nil
}

// setTag starts a step: packets carry tag from now on, sequences restart.
func (t *traffic) setTag(tag uint32) {
	t.tag = tag
	clear(t.seq)
}

// fill writes the next packet into b (at least size bytes) and returns
// its length. Generator only.
func (t *traffic) fill(b []byte) int {
	f := t.flow
	t.flow++
	if t.flow == flows {
		t.flow = 0
	}
	copy(b, t.tmpl[f])
	p := b[ipUDP:]
	binary.BigEndian.PutUint32(p[offTag:], t.tag)
	binary.BigEndian.PutUint32(p[offFlow:], uint32(f))
	binary.BigEndian.PutUint64(p[offSeq:], t.seq[f])
	t.seq[f]++
	t.count++
	return t.size
}

// sinkCounts are what the sink saw, cumulative; the sink publishes them
// once per batch.
type sinkCounts struct {
	Delivered uint64 // packets of the current step, checked good
	Reordered uint64 // of those, with a sequence number below the flow's next
	Stale     uint64 // good packets of an earlier step
	Corrupt   uint64 // not what the generator sent (a failure)
	Foreign   uint64 // not IPv4/UDP to the sink's port at all
}

// sink checks received inner packets: the IPv4 and UDP headers against
// the flow's template (TTL and header checksum aside: a router may
// decrement the one and so change the other; the checksum is verified
// instead), the whole payload pattern, and the sequence number per flow.
type sink struct {
	t     *traffic
	tag   atomic.Uint32 // the current step's tag (set by the runner)
	local sinkCounts    // the sink goroutine's own
	next  []uint64      // per flow, next expected sequence number
	ntag  []uint32      // per flow, the tag next belongs to
	pub   struct{ delivered, reordered, stale, corrupt, foreign atomic.Uint64 }
	// firstBad keeps the first corrupt packet's description.
	firstBad atomic.Pointer[string]
}

func newSink(t *traffic) *sink {
	return &sink{t: t, next: make([]uint64, flows), ntag: make([]uint32, flows)}
}

// check counts one inner IPv4 packet. Sink goroutine only.
func (s *sink) check(p []byte, tag uint32) {
	if len(p) < minSize || p[0]>>4 != 4 || p[9] != header.ProtoUDP || binary.BigEndian.Uint16(p[header.IPv4MinLen+2:]) != dstPort {
		s.local.Foreign++
		return
	}
	ptag := binary.BigEndian.Uint32(p[ipUDP+offTag:])
	if ptag != tag {
		// A late packet of an earlier step (tags are unique in the
		// process, so also of an earlier size): checked as far as its
		// own size allows.
		if ptag < tag && int(binary.BigEndian.Uint16(p[2:])) == len(p) && header.FoldChecksum(header.Checksum(p[:header.IPv4MinLen], 0)) == 0xffff {
			s.local.Stale++
		} else {
			s.bad(p, "run tag")
		}
		return
	}
	f := int(binary.BigEndian.Uint32(p[ipUDP+offFlow:]))
	if f >= flows || len(p) != s.t.size {
		s.bad(p, "length or flow")
		return
	}
	tm := s.t.tmpl[f]
	// Version to total length and identification to protocol; then
	// addresses, UDP header; then the pattern.
	if string(p[:8]) != string(tm[:8]) || p[9] != tm[9] || string(p[12:ipUDP]) != string(tm[12:ipUDP]) ||
		string(p[ipUDP+offPattern:]) != string(tm[ipUDP+offPattern:]) {
		s.bad(p, "header or payload")
		return
	}
	if header.FoldChecksum(header.Checksum(p[:header.IPv4MinLen], 0)) != 0xffff {
		s.bad(p, "IPv4 header checksum")
		return
	}
	seq := binary.BigEndian.Uint64(p[ipUDP+offSeq:])
	if s.ntag[f] != tag {
		s.ntag[f], s.next[f] = tag, 0
	}
	if seq < s.next[f] {
		s.local.Reordered++
	} else {
		s.next[f] = seq + 1
	}
	s.local.Delivered++
}

func (s *sink) bad(p []byte, what string) {
	s.local.Corrupt++
	if s.firstBad.Load() == nil {
		d := fmt.Sprintf("%s: % x", what, p[:min(len(p), 64)])
		s.firstBad.CompareAndSwap(nil, &d)
	}
}

// publish makes the sink goroutine's counts visible. Sink goroutine only.
func (s *sink) publish() {
	s.pub.delivered.Store(s.local.Delivered)
	s.pub.reordered.Store(s.local.Reordered)
	s.pub.stale.Store(s.local.Stale)
	s.pub.corrupt.Store(s.local.Corrupt)
	s.pub.foreign.Store(s.local.Foreign)
}

// counts reads the published counts. Any goroutine.
func (s *sink) counts() sinkCounts {
	return sinkCounts{
		Delivered: s.pub.delivered.Load(), Reordered: s.pub.reordered.Load(),
		Stale: s.pub.stale.Load(), Corrupt: s.pub.corrupt.Load(), Foreign: s.pub.foreign.Load(),
	}
}

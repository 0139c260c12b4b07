// Package udpframes writes the benchmarks' traffic to many peers: copies,
// taken round-robin, of Ethernet frames of IPv4 and UDP (untagged, a
// 20-byte IP header) that differ only in the destination address and the
// two checksums, made from one base frame and 8 bytes per frame.
//
// Why not copy each frame whole: 10,000 frames of 64 bytes are 640 KB of
// the generator's own reads streaming through the caches of the CPU the
// gateway under test runs on, beside its peers' state, in every round of
// a 10,000-peer run, where one peer's one frame stays in L1. That is a
// cost of the traffic generator, not of the gateway (a NIC writes the
// frames it receives with DMA and never reads a template on the gateway's
// core), and with it bench/scale's fastpath_100k_vs_1 and fastpath's
// BenchmarkManyPeers read about 3% low against the one-peer rate
// (docs/performance.md, 6 December).
package udpframes

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/wgpio/wgpio/header"
)

// Where the fields that may differ are in a frame.
const (
	ipChecksum  = header.EthernetLen + 10
	ipDst       = header.EthernetLen + 16
	udpChecksum = header.EthernetLen + header.IPv4MinLen + 6
)

// Frames is a generator. Not safe for concurrent use.
type Frames struct {
	base  []byte
	diffs []uint64 // per frame: destination (32 bits), IPv4 and UDP checksums (16 bits each)
	k     int      // the next frame
}

// New returns the generator of frames (at least one, all of one length),
// or an error when a frame differs from the first in more than its IPv4
// destination and its IPv4 and UDP checksums: what Next writes is byte for
// byte frames, in turn. New keeps no reference to frames.
func New(frames [][]byte) (*Frames, error) {
	if len(frames) == 0 {
		return nil, fmt.Errorf("udpframes: no frames")
	}
	g := &Frames{base: bytes.Clone(frames[0]), diffs: make([]uint64, len(frames))}
	b := make([]byte, len(g.base))
	for i, f := range frames {
		if len(f) < udpChecksum+2 {
			return nil, fmt.Errorf("udpframes: frame %d: %d bytes, too short for IPv4 and UDP", i, len(f))
		}
		g.diffs[i] = uint64(binary.BigEndian.Uint32(f[ipDst:]))<<32 |
			uint64(binary.BigEndian.Uint16(f[ipChecksum:]))<<16 | uint64(binary.BigEndian.Uint16(f[udpChecksum:]))
		g.put(b, i)
		if !bytes.Equal(b, f) {
			return nil, fmt.Errorf("udpframes: frame %d differs from the first in more than its destination and checksums", i)
		}
	}
	return g, nil
}

// Len is the frames' length in bytes.
func (g *Frames) Len() int { return len(g.base) }

// Next writes the next frame, round-robin, into b, which must hold Len
// bytes.
func (g *Frames) Next(b []byte) {
	g.put(b, g.k)
	if g.k++; g.k == len(g.diffs) {
		g.k = 0
	}
}

// put writes frame i into b.
func (g *Frames) put(b []byte, i int) {
	copy(b[:len(g.base)], g.base)
	d := g.diffs[i]
	binary.BigEndian.PutUint32(b[ipDst:], uint32(d>>32))
	binary.BigEndian.PutUint16(b[ipChecksum:], uint16(d>>16))
	binary.BigEndian.PutUint16(b[udpChecksum:], uint16(d))
}

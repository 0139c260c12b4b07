package fastpath

import (
	"encoding/binary"
	"net/netip"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/outerfrag"
	"github.com/wgpio/wgpio/internal/pathmtu"
)

// Outer packets over the WAN MTU.
//
// The tunnel MTU bounds the inner packets, and an outer packet is that
// plus 60 bytes (IPv4) or 80 (IPv6): a WAN whose MTU is lower (a PPPoE
// uplink at 1,492 with IPv6 endpoints and the default tunnel MTU, or a WAN
// MTU lowered while the gateway runs) cannot carry the largest ones whole.
// Linux's WireGuard sets ignore_df on what it sends, for both families, so
// the kernel cuts such a packet into IP fragments and nothing is lost; the
// peer's kernel reassembles them before its WireGuard sees the datagram. A
// worker does the same with the outer packets it builds (toWAN): IPv4
// fragments, DF being clear on our outer header (RFC 791 §3.2), or, for
// IPv6, the source's fragmentation with a Fragment header (RFC 8200
// §4.5); the identification of a fragmented packet comes from a sequence
// of the worker's that no other worker's meets, from a random start: for
// IPv4 the one every outer IPv4 packet of the worker takes its
// identification from (worker.ipID; RFC 6864), for IPv6 one of fragmented
// packets (fwdState.fragID; RFC 7739). Where the tunnel MTU and its
// outer headers fit the WAN MTU, a batch of tunnel packets pays one
// compare; elsewhere each frame pays one.

// wanBatchLen is the most frames toWANFragmented hands the WAN port at
// once: at least a whole packet's fragments (maxFragments) beside what
// came before them.
const wanBatchLen = 2 * maxFragments

// toWAN transmits frames, Ethernet frames of our outer packets, on the WAN:
// as they are when each fits the WAN MTU (Engine.SetWANMTU) and its
// endpoint's path MTU (Engine.SetPathMTU), which is the common case;
// otherwise each oversized one as fragments in its place, so that the
// order of the batch is kept. tunnel says that the frames are transport
// messages of inner packets within the tunnel MTU (outbound's, held
// packets, the host's): when the largest of those fits the WAN MTU and
// every path MTU learnt (Engine.maxOuter), as on a gateway configured as
// wg-quick would, no frame is looked at; control frames (any payload)
// are. It takes the frames (each sent, freed or fragmented); the caller
// clears its slice as after transmit. It returns how many the port took,
// frames[:sent] (all of a batch that was fragmented: what its fragments
// lost is counted as ring_full, not told apart by packet).
func (w *worker) toWAN(frames []dataplane.Frame, tunnel bool) (sent int) {
	mtu := int(w.e.wanMTU.Load())
	pm := w.e.pathMTU.Load()
	least := mtu
	if pm != nil && (least <= 0 || pm.Least < least) {
		least = pm.Least
	}
	if least > 0 && !(tunnel && w.e.maxOuter <= least) {
		// The longest frame that fits: the MTU and the Ethernet header
		// (a frame with the WAN's tag has 4 bytes more of it).
		limit := least + w.wanL2
		for i := range frames {
			if frames[i].Len() > limit {
				if m := w.frameMTU(&frames[i], mtu, pm); m > 0 && frames[i].Len() > m+w.wanL2 {
					w.toWANFragmented(frames, i, mtu, pm)
					return len(frames)
				}
			}
		}
	}
	return w.transmit(w.wanTX, frames)
}

// frameMTU is the MTU, bytes of IP packet, that the outer packet in f must
// fit: the WAN MTU mtu (0 or less: none), or the path MTU pm holds for its
// IPv6 destination where that is less.
func (w *worker) frameMTU(f *dataplane.Frame, mtu int, pm *pathmtu.Snapshot) int {
	if pm == nil {
		return mtu
	}
	d := f.Data()
	if len(d) < w.wanL2+header.IPv6Len || d[w.wanL2]>>4 != header.IPv6Version {
		return mtu
	}
	if p, ok := pm.Lookup(netip.AddrFrom16([16]byte(d[w.wanL2+24 : w.wanL2+40]))); ok && (mtu <= 0 || p < mtu) {
		return p
	}
	return mtu
}

// toWANFragmented is toWAN for a batch whose frame first is the first one
// over its MTU (frameMTU of the WAN MTU mtu and the path MTUs pm): the
// batch goes out in order, each oversized frame replaced by its fragments,
// gathered in w.fwd.wanBatch so that the port is kicked once per
// wanBatchLen frames, not once per fragmented packet (a syscall each on
// AF_XDP in copy mode).
//
//go:noinline
func (w *worker) toWANFragmented(frames []dataplane.Frame, first, mtu int, pm *pathmtu.Snapshot) {
	batch := w.fwd.wanBatch[:0]
	flush := func() {
		w.transmit(w.wanTX, batch)
		clear(batch)
		batch = batch[:0]
	}
	for i := range frames {
		f := &frames[i]
		m := mtu
		if i >= first {
			m = w.frameMTU(f, mtu, pm)
		}
		if i < first || m <= 0 || f.Len() <= m+w.wanL2 {
			if len(batch) == cap(batch) {
				flush()
			}
			batch = append(batch, *f)
			*f = dataplane.Frame{}
			continue
		}
		frags := w.fragmentOuter(f, m)
		if len(batch)+len(frags) > cap(batch) {
			flush()
		}
		batch = append(batch, frags...)
		clear(frags)
	}
	flush()
}

// fragmentOuter cuts the outer packet in f into IP fragments of at most
// mtu bytes, each with f's Ethernet header, and takes f: it returns the
// fragments in order (in w.fwd.frags, the caller's until the next call).
// A packet the fragmenters refuse (more than maxFragments, or not an IP
// packet that can be cut) comes back whole, for the port to count as too
// long; without frames (or, for IPv6, headroom) for the fragments it is
// dropped and counted (DropFragmentNoBuffer), and none come back.
func (w *worker) fragmentOuter(f *dataplane.Frame, mtu int) []dataplane.Frame {
	d := f.Data()
	l2 := header.EthernetLen
	if len(d) >= header.EthernetVLANLen && binary.BigEndian.Uint16(d[12:14]) == header.EtherTypeVLAN {
		l2 = header.EthernetVLANLen
	}
	ip := d[l2:]
	v6 := len(ip) > 0 && ip[0]>>4 == header.IPv6Version
	var k int // fragments
	// IPv4 keeps the identification wrap or putOuter gave the packet,
	// from the worker's sequence of all its outer IPv4 packets (ipID):
	// whole ones may be fragmented on the way, DF being clear, so one
	// sequence keeps an identification from two of them at once.
	id := w.fwd.fragID + w.fwd.fragStep
	if v6 {
		if w.fwd.frag6.Reset(ip, mtu, id) == header.OK {
			k = w.fwd.frag6.Count()
		}
	} else if w.fwd.frag.Reset(ip, mtu) == header.OK {
		k = w.fwd.frag.Count()
	}
	if k < 2 || k > maxFragments {
		frags := w.fwd.frags[:1]
		frags[0] = *f
		*f = dataplane.Frame{}
		return frags
	}
	frags := w.fwd.frags[:k]
	if v6 {
		w.fwd.fragID = id
	}
	more := frags[1:]
	if got := w.wanTX.Alloc(more); got < len(more) {
		w.wanTX.Free(more[:got])
		clear(more)
		w.dropOuter(f)
		return nil
	}
	if !outerfrag.Into(f, more, l2, v6, &w.fwd.frag, &w.fwd.frag6) {
		w.wanTX.Free(more)
		clear(more)
		w.dropOuter(f)
		return nil
	}
	frags[0] = *f
	*f = dataplane.Frame{}
	w.c.outerFragmented.Add(1)
	w.c.outerFrags.Add(uint64(k))
	return frags
}

// dropOuter frees f, an outer packet that could not be fragmented, and
// counts it.
func (w *worker) dropOuter(f *dataplane.Frame) {
	w.count(DropFragmentNoBuffer, 1)
	w.wanTX.Free(unsafeOne(f))
	*f = dataplane.Frame{}
}

package tundev

import (
	"net/netip"

	"github.com/wgpio/wgpio/header"
)

// icmpSources are the source addresses of the answers to oversized
// packets and of time exceeded: v4, v6 toward the LAN, ll6 toward a LAN
// host's link-local address (invalid: v6), tun4, tun6 into the tunnel
// (router.go), own6 into the tunnel to a link-local address (the tunnel
// address alone); invalid: no answer of that family. nets are our LAN
// addresses with their prefix lengths (SetICMPSubnets), which lanFrom
// picks from per sender. Immutable once stored.
type icmpSources struct {
	v4, v6, ll6, tun4, tun6, own6 netip.Addr
	nets                          []netip.Prefix
}

// lanFrom is the source of an error toward the LAN host that sent pkt:
// ours of pkt's family on the LAN, the link-local one for a link-local
// sender when we have one (Linux's source address selection: the address
// of the destination's scope on the interface the error leaves by, RFC
// 6724 §5 rule 2, seen on Linux 6.18). Of several LAN addresses (nets),
// the one of the sender's subnet (IPv4) or with the longest prefix in
// common with it (IPv6), as Linux picks it (header.ErrorSource); v4 or
// v6 for a sender on none of them.
func (s *icmpSources) lanFrom(pkt []byte) netip.Addr {
	if pkt[0]>>4 == header.IPv4Version {
		if a := header.ErrorSource(s.nets, netip.AddrFrom4([4]byte(pkt[12:16]))); a.IsValid() {
			return a
		}
		return s.v4
	}
	if s.ll6.IsValid() && linkLocalSource(pkt) {
		return s.ll6
	}
	if a := header.ErrorSource(s.nets, netip.AddrFrom16([16]byte(pkt[8:24]))); a.IsValid() {
		return a
	}
	return s.v6
}

// tunnelFrom is the source of an error into the tunnel about pkt: our
// tunnel address of pkt's family, else the LAN's; to a link-local sender
// the tunnel address alone (invalid: no error), as Linux picks the source
// of an error to a link-local address among wg0's own addresses only
// (seen on Linux 6.18).
func (s *icmpSources) tunnelFrom(pkt []byte) netip.Addr {
	switch {
	case pkt[0]>>4 == header.IPv4Version:
		return s.tun4
	case linkLocalSource(pkt):
		return s.own6
	}
	return s.tun6
}

// linkLocalSource reports whether pkt is IPv6 from a link-local address
// (fe80::/10).
func linkLocalSource(pkt []byte) bool {
	return pkt[0]>>4 == header.IPv6Version && pkt[8] == 0xfe && pkt[9]&0xc0 == 0x80
}

// SetICMPSources replaces PortConfig.ICMPSource4 and ICMPSource6, the
// sources of "fragmentation needed" and "packet too big" and of the other
// errors toward the LAN: a gateway calls it when its LAN interface's
// addresses change, as Linux answers from the addresses of the moment.
// Safe for concurrent use with Read and Write; the next answer uses them.
func (d *PortDevice) SetICMPSources(v4, v6 netip.Addr) {
	d.icmpSrcMu.Lock()
	defer d.icmpSrcMu.Unlock()
	s := d.icmpSrc.Load()
	d.storeICMPSources(v4, v6, s.ll6, s.nets)
}

// SetICMPSubnets replaces the LAN addresses with their prefix lengths
// (none at first) of which an error toward a LAN host takes the one of
// the host's subnet (IPv4) or with the longest prefix in common with it
// (IPv6): a gateway calls it with the LAN interface's global addresses
// when they change, as Linux answers from the address of the route back.
// A host on none of them gets the error from ICMPSource4 or ICMPSource6.
// d keeps nets. Safe for concurrent use with Read and Write; the next
// answer uses them.
func (d *PortDevice) SetICMPSubnets(nets []netip.Prefix) {
	d.icmpSrcMu.Lock()
	defer d.icmpSrcMu.Unlock()
	s := d.icmpSrc.Load()
	d.storeICMPSources(s.v4, s.v6, s.ll6, nets)
}

// SetICMPLinkLocal replaces PortConfig.ICMPLinkLocal6, the source of the
// ICMPv6 errors to LAN hosts' link-local addresses (invalid: ICMPSource6
// instead): a gateway calls it when its LAN interface's link-local
// address changes. Safe for concurrent use with Read and Write; the next
// answer uses it.
func (d *PortDevice) SetICMPLinkLocal(addr netip.Addr) {
	d.icmpSrcMu.Lock()
	defer d.icmpSrcMu.Unlock()
	s := d.icmpSrc.Load()
	d.storeICMPSources(s.v4, s.v6, addr, s.nets)
}

// ICMPLinkLocal returns the source of the ICMPv6 errors to LAN hosts'
// link-local addresses of now (PortConfig.ICMPLinkLocal6, then
// SetICMPLinkLocal's; invalid: none, ICMPSource6 answers them). Safe for
// concurrent use.
func (d *PortDevice) ICMPLinkLocal() netip.Addr { return d.icmpSrc.Load().ll6 }

// storeICMPSources publishes the sources made of our LAN addresses and
// PortConfig.TunnelSource4/6; d.icmpSrcMu held (or NewPortDevice's).
func (d *PortDevice) storeICMPSources(v4, v6, ll6 netip.Addr, nets []netip.Prefix) {
	if !ll6.Is6() || !ll6.IsLinkLocalUnicast() {
		ll6 = netip.Addr{}
	}
	s := &icmpSources{v4: v4, v6: v6, ll6: ll6, tun4: d.cfg.TunnelSource4, tun6: d.cfg.TunnelSource6, nets: nets}
	if !s.tun4.Is4() {
		s.tun4 = v4
	}
	if s.tun6.Is6() {
		s.own6 = s.tun6
	} else {
		s.tun6 = v6
	}
	d.icmpSrc.Store(s)
}

// fragState holds the received IPv4 packets over the tunnel MTU that Read
// returns as fragments, copied out of their frames back to back, and the
// packet being cut. Its buffer holds a whole batch of packets of the
// largest MTU the port may take (largestMTU: 128 × 3,822 bytes on an
// AF_XDP port with 4 KiB frames), so a burst of large packets is never
// dropped for room, also after the LAN's MTU was raised while running.
type fragState struct {
	buf  []byte
	used int
	q    []fragPkt // packets waiting, in arrival order
	head int       // next packet of q to cut
	fr   header.IPv4Fragmenter
	pend int // 1 + the next fragment of fr to return; 0: none
}

// fragPkt is a packet of fragState's buffer; whole: one that fits the
// MTU, received after a packet to cut in the same burst, and returned
// whole after its fragments (queueWhole).
type fragPkt struct {
	off, n int
	whole  bool
}

func newFragState(mtu int) fragState {
	return fragState{buf: make([]byte, PortBatchSize*mtu), q: make([]fragPkt, 0, PortBatchSize)}
}

// pending reports whether fragments are waiting.
func (f *fragState) pending() bool { return f.pend > 0 || f.head < len(f.q) }

// overMTU handles a received packet pkt (its IP length) larger than the
// tunnel MTU, as a router in front of the tunnel does (RFC 1812 §5.2.6,
// RFC 8200 §5): an IPv4 packet without DF is queued for fragmentation
// (fragState.next returns the fragments); otherwise the packet is dropped
// and answered with "fragmentation needed" (RFC 1191) or "packet too big"
// (RFC 8201), never rate-limited (Linux exempts them: path MTU discovery
// must not break), where Linux routes it (icmpErrorLAN). eth is the
// frame's Ethernet header (and 802.1Q tag).
func (d *PortDevice) overMTU(eth, pkt []byte) {
	v4 := pkt[0]>>4 == header.IPv4Version
	if v4 && !header.IPv4(pkt).DontFragment() {
		f := &d.frag
		if len(f.q) == cap(f.q) || len(f.buf)-f.used < len(pkt) {
			d.ctr.drops[PortDropFragment].Add(1)
			return
		}
		f.q = append(f.q, fragPkt{off: f.used, n: copy(f.buf[f.used:], pkt)})
		header.DecrementHop(f.buf[f.used:]) // forwardIn checked the TTL
		f.used += len(pkt)
		return
	}
	d.ctr.drops[PortDropOverMTU].Add(1)
	d.icmpErrorLAN(eth, pkt, icmpError{kind: icmpTooBig, mtu: d.cfg.MTU})
}

// queueWhole queues pkt, a packet within the MTU (hop taken, MSS
// clamped), behind the packets to cut received before it in the same
// burst, so that Read keeps the order of a flow that mixes the two, as
// Linux's fragmentation does (it went out ahead of their fragments). Its
// copy is dropped as PortDropFragment when the buffer is full.
func (f *fragState) queueWhole(d *PortDevice, pkt []byte) {
	if len(f.q) == cap(f.q) || len(f.buf)-f.used < len(pkt) {
		d.ctr.drops[PortDropFragment].Add(1)
		return
	}
	f.q = append(f.q, fragPkt{off: f.used, n: copy(f.buf[f.used:], pkt), whole: true})
	f.used += len(pkt)
}

// next writes waiting fragments (and whole packets queued behind them),
// in order, into bufs[i][offset:] and returns how many; those that do
// not fit wait for the next call.
func (f *fragState) next(d *PortDevice, bufs [][]byte, sizes []int, offset int) int {
	n := 0
	for n < len(bufs) {
		if f.pend == 0 {
			if f.head == len(f.q) {
				f.q, f.head, f.used = f.q[:0], 0, 0
				break
			}
			p := f.q[f.head]
			f.head++
			if p.whole {
				if buf := after(bufs[n], offset); len(buf) >= p.n {
					sizes[n] = copy(buf, f.buf[p.off:p.off+p.n])
					n++
				} else {
					d.ctr.drops[PortDropTooBig].Add(1)
				}
				continue
			}
			if f.fr.Reset(f.buf[p.off:p.off+p.n], d.cfg.MTU) != header.OK {
				d.ctr.drops[PortDropFragment].Add(1)
				continue
			}
			f.pend = 1
		}
		i := f.pend - 1
		buf := after(bufs[n], offset)
		if len(buf) < f.fr.Len(i) {
			// The packet is lost, the fragments before this one with
			// it: counted once.
			d.ctr.drops[PortDropTooBig].Add(1)
			f.pend = 0
			continue
		}
		if i == 0 {
			// Fragment 0 is the packet's header rewritten in place;
			// the later fragments' data past it are left alone.
			sizes[n] = copy(buf, f.buf[f.q[f.head-1].off:][:f.fr.PutFirst()])
		} else {
			sizes[n] = f.fr.Put(buf, i)
		}
		n++
		if f.pend++; f.pend > f.fr.Count() {
			f.pend = 0
			d.ctr.fragmented.Add(1) // every fragment went
		}
	}
	return n
}

// after is b[offset:], or nil when b is shorter than offset (a caller's
// buffer too small for anything: the packet is counted too_big).
func after(b []byte, offset int) []byte {
	if offset > len(b) {
		return nil
	}
	return b[offset:]
}

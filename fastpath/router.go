package fastpath

import (
	"encoding/binary"
	"net/netip"
	"slices"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// What a worker does to transit packets as the router it replaces would
// (RFC 1812 §5.3.1, RFC 8200 §3, RFC 791 §3.2): the TTL / hop limit
// decrement, time exceeded, IPv4 fragmentation over the tunnel MTU, ECN
// between inner and outer headers (RFC 6040, as the kernel's WireGuard), and
// the optional TCP MSS clamp. Transit packets are those from the LAN into
// the tunnel and from the tunnel to the LAN; packets from or to the gateway
// itself (the exception interface, Config.Exception) are not.

// fragSlots is how many extra frames a burst may grow by through
// fragmentation (fragments 1 and later of its oversized packets): six per
// packet, what a burst of 9,000-byte jumbo frames needs at a 1,420-byte
// tunnel MTU; past it a packet is dropped (fragment_no_buffer).
func fragSlots(burst int) int { return 6 * burst }

// maxFragments bounds the fragments of one packet a worker cuts after
// routing it: a decrypted packet toward the LAN (a 65,535-byte packet at
// the smallest LAN MTU the engine accepts for IPv4, 576, needs 119) or an
// outer packet over the WAN MTU (wanfrag.go: a 3,836-byte frame at IPv4's
// least MTU, 68, needs 80).
const maxFragments = 128

// MaxFragments is the most fragments a worker cuts one packet into
// (maxFragments): an outer packet that would need more leaves whole, for
// the WAN port to drop as too_long (tunnelmtu.Limits).
const MaxFragments = maxFragments

// fwdState is a worker's scratch for forwarding.
type fwdState struct {
	frag  header.IPv4Fragmenter
	frag6 header.IPv6Fragmenter // outer IPv6 packets (wanfrag.go)
	// frags holds the fragments of one packet: a decrypted one over the
	// LAN MTU, or an outer one over the WAN MTU.
	frags [maxFragments]dataplane.Frame
	// runs lists the packets of an outbound burst that fragment cut, in
	// frame order, and scratch holds their fragments 1 and later while
	// interleaveFragments moves them behind their packets (capacities:
	// the burst, and fragSlots of it; set by newWorker).
	runs    []fragRun
	scratch []dataplane.Frame
	// wanBatch gathers a WAN batch with fragments (wanfrag.go).
	wanBatch [wanBatchLen]dataplane.Frame
	// fragID is the identification of the last outer IPv6 packet the
	// worker sent as fragments (wanfrag.go; IPv4 fragments keep the
	// packet's own, worker.ipID). The workers' sequences start at one
	// random base (RFC 7739: not predictable from outside), worker i's at
	// base + i, each stepping by fragStep, the number of workers: two
	// workers never give one identification to fragments toward one
	// peer, whose reassembly would mix them up, until a sequence wraps.
	fragID, fragStep uint32
	// icmp holds a time exceeded error on its way into the tunnel.
	icmp [header.ICMPv6ErrorMaxLen]byte
	// reply holds an ICMP error on its way to the LAN (icmpToLAN): a
	// local array passed to the port's Alloc escaped, one allocation per
	// error.
	reply [1]dataplane.Frame
}

// icmpSources are the sources of the ICMP errors a worker sends, chosen as
// Linux chooses them for a forwarded packet's error: an address of the
// interface the error leaves by (RFC 1812 §4.3.2.4; RFC 4443 §2.2),
// else the host's primary one. lan4, lan6 are our LAN addresses (errors
// toward LAN hosts), lanLL6 our link-local one there (errors to a LAN
// host's link-local address; invalid: lan6 instead); tun4, tun6 our
// first tunnel address of the family, else the LAN one (errors into the
// tunnel), own6 the tunnel one alone (errors into the tunnel to a
// link-local address; invalid: none is sent). Invalid: no error of that
// family is sent. Never modified after Engine.SetLANAddrs or
// SetLANLinkLocal publishes it; a worker loads it once per error it sends
// (no lock, no allocation).
type icmpSources struct {
	lan4, lan6, lanLL6 netip.Addr
	tun4, tun6, own6   netip.Addr
	// lanNets are our LAN addresses with their prefix lengths
	// (SetLANSubnets), which lanFrom picks from per destination.
	lanNets []netip.Prefix
}

// lanFrom returns the source of an error toward the LAN host that sent
// the IP packet p: our LAN address of p's family, our link-local one for
// a link-local sender when we have one. Linux's source address selection
// for a link-local destination takes the addresses of the interface the
// error leaves by alone, and of those the one of the same scope (RFC 6724
// §5 rule 2; ipv6_dev_get_saddr), as seen on Linux 6.18.
//
// Of several LAN addresses (lanNets), an IPv4 error comes from the one
// whose subnet holds the sender, as Linux's comes from the preferred
// source of its route back (the connected route of that subnet); an
// IPv6 one from the one with the longest prefix in common with the
// sender, up to its own prefix length (RFC 6724 §5 rule 8, RFC 4443 §2.2;
// ipv6_dev_get_saddr). A sender on none of them gets the error from
// lan4 or lan6, the interface's first address of the family.
func (s *icmpSources) lanFrom(p []byte) netip.Addr {
	if p[0]>>4 == header.IPv4Version {
		if a := header.ErrorSource(s.lanNets, netip.AddrFrom4([4]byte(p[12:16]))); a.IsValid() {
			return a
		}
		return s.lan4
	}
	if s.lanLL6.IsValid() && linkLocalSource(p) {
		return s.lanLL6
	}
	if a := header.ErrorSource(s.lanNets, netip.AddrFrom16([16]byte(p[8:24]))); a.IsValid() {
		return a
	}
	return s.lan6
}

// tunnelFrom returns the source of an error into the tunnel about the IP
// packet p: our tunnel address of p's family, else our LAN address; for a
// link-local sender our tunnel address alone (invalid: no error), as
// Linux's source address selection for a link-local destination takes
// only the addresses of wg0, the interface the error leaves by, and sends
// nothing when it has none (seen on Linux 6.18: wg0 has no link-local
// address of its own).
func (s *icmpSources) tunnelFrom(p []byte) netip.Addr {
	switch {
	case p[0]>>4 == header.IPv4Version:
		return s.tun4
	case linkLocalSource(p):
		return s.own6
	}
	return s.tun6
}

// linkLocalSource reports whether the IP packet p is IPv6 from a
// link-local address (fe80::/10).
func linkLocalSource(p []byte) bool {
	return p[0]>>4 == header.IPv6Version && p[8] == 0xfe && p[9]&0xc0 == 0x80
}

// SetLANAddrs replaces Config.LANAddr4 and LANAddr6, our LAN addresses,
// while the engine runs (the LAN interface renumbered): the ICMP errors
// workers send toward LAN hosts, and into the tunnel where we have no
// tunnel address of the family, come from them from the next error on.
// Either may be invalid: no error of that family is sent then. Safe for
// concurrent use; it allocates, the workers do not.
func (e *Engine) SetLANAddrs(addr4, addr6 netip.Addr) {
	e.icmpSrcMu.Lock()
	defer e.icmpSrcMu.Unlock()
	var ll6 netip.Addr
	var nets []netip.Prefix
	if old := e.icmpSrc.Load(); old != nil {
		ll6, nets = old.lanLL6, old.lanNets
	}
	e.storeICMPSources(addr4, addr6, ll6, nets)
}

// SetLANSubnets gives the engine all our LAN addresses with their prefix
// lengths (as the interface lists them; IPv6 ones usable as sources
// only): an ICMP error toward a LAN host comes from the one of the
// host's subnet (IPv4), or with the longest matching prefix (IPv6), as a
// Linux router's does, and from LANAddrs' otherwise. Nil: LANAddrs' for
// every host. Safe for concurrent use; it copies nets.
func (e *Engine) SetLANSubnets(nets []netip.Prefix) {
	e.icmpSrcMu.Lock()
	defer e.icmpSrcMu.Unlock()
	old := e.icmpSrc.Load()
	e.storeICMPSources(old.lan4, old.lan6, old.lanLL6, slices.Clone(nets))
}

// SetLANLinkLocal replaces Config.LANLinkLocal6, our IPv6 link-local
// address on the LAN, while the engine runs: the ICMPv6 errors workers
// send to LAN hosts' link-local addresses come from it from the next
// error on (from LANAddr6 when it is invalid). Safe for concurrent use;
// it allocates, the workers do not.
func (e *Engine) SetLANLinkLocal(addr netip.Addr) {
	e.icmpSrcMu.Lock()
	defer e.icmpSrcMu.Unlock()
	var v4, v6 netip.Addr
	var nets []netip.Prefix
	if old := e.icmpSrc.Load(); old != nil {
		v4, v6, nets = old.lan4, old.lan6, old.lanNets
	}
	e.storeICMPSources(v4, v6, addr, nets)
}

// storeICMPSources publishes the sources made of our LAN addresses and
// the tunnel addresses (Config.TunnelAddrs); e.icmpSrcMu held.
func (e *Engine) storeICMPSources(addr4, addr6, ll6 netip.Addr, nets []netip.Prefix) {
	if !ll6.Is6() || !ll6.IsLinkLocalUnicast() {
		ll6 = netip.Addr{}
	}
	s := &icmpSources{lan4: addr4.Unmap(), lan6: addr6, lanLL6: ll6, tun4: addr4.Unmap(), tun6: addr6, lanNets: nets}
	for i := len(e.cfg.TunnelAddrs) - 1; i >= 0; i-- {
		if a := e.cfg.TunnelAddrs[i].Unmap(); a.Is4() {
			s.tun4 = a
		} else if a.Is6() {
			s.tun6, s.own6 = a, a
		}
	}
	e.icmpSrc.Store(s)
}

// LANAddrs returns the LAN addresses ICMP errors toward LAN hosts come from
// (Config.LANAddr4 and LANAddr6, or SetLANAddrs' latest).
func (e *Engine) LANAddrs() (addr4, addr6 netip.Addr) {
	s := e.icmpSrc.Load()
	return s.lan4, s.lan6
}

// LANLinkLocal returns the link-local address ICMPv6 errors toward LAN
// hosts' link-local addresses come from (Config.LANLinkLocal6, or
// SetLANLinkLocal's latest); invalid: none, LANAddrs' IPv6 one instead.
func (e *Engine) LANLinkLocal() netip.Addr { return e.icmpSrc.Load().lanLL6 }

// icmpToLAN answers the IP packet in f (its data from the IP header, the
// Ethernet header of l2 bytes still in the headroom) toward its sender on
// the LAN (icmpErrorToLAN): time exceeded (ttl true, rate-limited) or
// fragmentation needed / packet too big with the tunnel MTU (never
// limited: path MTU discovery must not break; nothing for IPv4 without DF,
// which is fragmented instead). The caller drops and counts f.
func (w *worker) icmpToLAN(f *dataplane.Frame, l2 int, ttl bool, now int64) {
	e := icmpError{kind: icmpTimeExceeded}
	if !ttl {
		if p := f.Data(); p[0]>>4 == header.IPv4Version && !header.IPv4(p).DontFragment() {
			return // fragmented instead; not an error
		}
		e = icmpError{kind: icmpTooBig, mtu: w.e.cfg.MTU}
	}
	w.icmpErrorToLAN(f, l2, e, now)
}

// timeExceededTunnel answers a packet that came out of the tunnel with TTL
// or hop limit 1 (p, its inner IP packet, already authenticated and
// replay-checked) with time exceeded back into the tunnel (icmpTunnel).
func (w *worker) timeExceededTunnel(p []byte, now int64) {
	w.icmpTunnel(p, icmpError{kind: icmpTimeExceeded}, now)
}

// fragment cuts the IPv4 packet in f (no DF, over the tunnel MTU, TTL
// already decremented) into fragments of at most the tunnel MTU (RFC 791
// §3.2, header.IPv4Fragmenter): f becomes fragment 0, and fragments 1 and
// later go into frames from the LAN TX half's pool at w.frames[n:], each
// for pl (so that the peer's nonce reservation counts them). It returns the
// frames added, or -1 when there are not frames enough (nothing changed;
// the caller drops f, fragment_no_buffer) or the packet cannot be cut (its
// header leaves no room in the MTU: too_big).
func (w *worker) fragment(f *dataplane.Frame, pl *peerLocal, n int) int {
	fr := &w.fwd.frag
	if fr.Reset(f.Data(), w.e.cfg.MTU) != header.OK {
		return -2
	}
	k := fr.Count() - 1
	if n+k > len(w.frames) {
		return -1
	}
	more := w.frames[n : n+k]
	if got := w.lanTX.Alloc(more); got < k {
		w.lanTX.Free(more[:got])
		clear(more[:got])
		return -1
	}
	for i := range more {
		m := &more[i]
		if !m.SetLen(fr.Len(i + 1)) {
			w.lanTX.Free(more)
			clear(more)
			return -1
		}
		fr.Put(m.Data(), i+1)
		w.peerOf[n+i] = pl
	}
	f.SetLen(fr.PutFirst())
	w.c.fragmented.Add(1)
	w.c.fragments.Add(uint64(k + 1))
	return k
}

// fragRun says that frame i of an outbound burst was cut into fragments
// and that fragment added k frames (its fragments 1 and later) at the
// burst's end.
type fragRun struct{ i, k int32 }

// interleaveFragments puts the fragments 1 and later of an outbound
// burst's oversized packets, which fragment added at w.frames[n:n+extra]
// (the packets' runs in w.fwd.runs, in frame order), right behind the
// packet's fragment 0, with their peerOf, and the burst's other frames
// behind them, so that the burst is sealed and leaves in the order it came,
// each packet's fragments in a row, as Linux's ip_fragment sends them all
// before it forwards the next packet. Left at the burst's end, they reached
// the peer after the burst's later packets: a UDP flow's small datagram
// behind a large one without DF was delivered before it, the far host's
// reassembly completing the large one only then. Frames before the first
// run do not move. Not inlined: bursts without fragments never call it.
//
//go:noinline
func (w *worker) interleaveFragments(n, extra int) {
	runs := w.fwd.runs
	frags := w.fwd.scratch[:extra]
	copy(frags, w.frames[n:n+extra])
	// From the end back: each run's packet, its fragments, then the frames
	// up to the next run's packet, moved up by the fragments of the runs
	// before it (copy moves overlapping ranges as memmove does).
	wp, end, off := n+extra, n, extra
	for j := len(runs) - 1; j >= 0; j-- {
		i, k := int(runs[j].i), int(runs[j].k)
		seg := end - (i + 1)
		copy(w.frames[wp-seg:wp], w.frames[i+1:end])
		copy(w.peerOf[wp-seg:wp], w.peerOf[i+1:end])
		wp -= seg
		off -= k
		copy(w.frames[wp-k:wp], frags[off:off+k])
		pl := w.peerOf[i]
		for x := wp - k; x < wp; x++ {
			w.peerOf[x] = pl
		}
		wp -= k
		w.frames[wp-1], w.peerOf[wp-1] = w.frames[i], pl
		wp--
		end = i
	}
	clear(frags)
}

// putOuterIPv4 writes the outer ECN field for an inner packet whose ECN field
// was inner (header.EncapECN: the kernel's WireGuard's rule) into the outer
// IP header at b[l3:], which the template wrote with TOS / traffic class 0;
// for IPv4 it also stores the identification id, and fixes the header
// checksum for both with one incremental update (RFC 1624 eqn. 3: the
// template's fields were 0).
func putOuterIPv4(b []byte, l3 int, id uint16, ecn uint8) {
	b[l3+1] = ecn
	binary.BigEndian.PutUint16(b[l3+4:l3+6], id)
	ck := binary.BigEndian.Uint16(b[l3+10 : l3+12])
	s := uint32(^ck) + uint32(id) + uint32(ecn)
	binary.BigEndian.PutUint16(b[l3+10:l3+12], ^header.FoldChecksum(s))
}

// putOuterIPv6ECN sets the ECN bits of the outer IPv6 traffic class (the
// template wrote 0).
func putOuterIPv6ECN(b []byte, l3 int, ecn uint8) { b[l3+1] |= ecn << 4 }

// clampMSS applies Config.MSSClamp to the IP packet p (header checked).
func (w *worker) clampMSS(p []byte) {
	mss := w.e.mss4
	if p[0]>>4 != header.IPv4Version {
		mss = w.e.mss6
	}
	header.ClampMSS(p, mss)
}

// toLANOverMTU handles a decrypted transit packet in f (its inner IP packet,
// no Ethernet yet) larger than the LAN MTU of the burst (w.lanMTU), as a
// router does at the LAN interface: IPv4 without DF is cut into fragments
// of the LAN MTU (RFC 791) and sent to the next hop (fragmentToLAN), or
// waits for the next hop's MAC as a fitting packet does (the first pass,
// overLANMTU, found it known; this is for the rare slot reused since). An
// IPv4 packet with DF or an IPv6 packet is dropped (lan_too_big, counted in
// bad) and answered into the tunnel with "fragmentation needed" / "packet
// too big" carrying the LAN MTU, from our tunnel address (never
// rate-limited). f is zeroed when handed on (sent, or waiting); otherwise
// the caller frees it. The caller (deliver) has sent the burst's frames
// before f, so that its fragments follow them.
func (w *worker) toLANOverMTU(f *dataplane.Frame, bad *[NumDropReasons]int32, now int64) {
	p := f.Data()
	if p[0]>>4 != header.IPv4Version || header.IPv4(p).DontFragment() {
		w.mtuErrorTunnel(p, w.lanMTU, now)
		bad[DropLANTooBig]++
		return
	}
	dst := netip.AddrFrom4(header.IPv4(p).DstBytes())
	mac, ok := w.lanNeighbour(dst, now)
	if !ok {
		w.waitNeighbour(f, w.nbrHold(dst), bad)
		return
	}
	if !w.fragmentToLAN(f, mac, w.lanMTU) {
		bad[DropLANTooBig]++
		return
	}
	*f = dataplane.Frame{}
}

// overLANMTU is the first pass's verdict on the transit packet ip toward
// dst, larger than the LAN MTU: innerOverLANMTU, or innerNoNeighbour (with
// nbrHold's answer) for IPv4 without DF whose LAN next hop has no MAC yet
// or has frames waiting for it. Such a packet is fragmented toward the LAN
// and, as Linux queues its fragments for the neighbour (ip_finish_output2
// after ip_fragment: the arp_queue), it waits in the same list, in order,
// counted once, and is cut when the neighbour resolves
// (flushNeighbourWait). Not inlined: a rare path, kept out of
// authenticate's loop.
//
//go:noinline
func (w *worker) overLANMTU(ip []byte, dst netip.Addr, now int64) (v innerVerdict, counted bool) {
	if ip[0]>>4 != header.IPv4Version || header.IPv4(ip).DontFragment() {
		return innerOverLANMTU, false // answered with an ICMP error
	}
	if w.nbrWaiting(dst) {
		return innerNoNeighbour, w.nbrHold(dst)
	}
	if _, ok := w.lanNeighbour(dst, now); !ok {
		return innerNoNeighbour, w.nbrHold(dst)
	}
	return innerOverLANMTU, false
}

// fragmentToLAN cuts the IPv4 packet in f (no DF, no Ethernet yet) into
// fragments of at most mtu bytes (RFC 791 §3.2) and transmits them to mac
// on the LAN, f as fragment 0 (then the LAN TX ring's), fragments 1 and
// later in frames of the LAN TX pool. It reports false, f unchanged and
// still the caller's, when the packet cannot be cut (or needs more than
// maxFragments) or the pool has not frames enough.
func (w *worker) fragmentToLAN(f *dataplane.Frame, mac [6]byte, mtu int) bool {
	fr := &w.fwd.frag
	if fr.Reset(f.Data(), mtu) != header.OK || fr.Count() > maxFragments {
		return false
	}
	k := fr.Count()
	frags := w.fwd.frags[:k]
	more := frags[1:]
	if got := w.lanTX.Alloc(more); got < len(more) {
		w.lanTX.Free(more[:got])
		clear(more)
		return false
	}
	for i := range more {
		m := &more[i]
		if !m.SetLen(fr.Len(i + 1)) {
			w.lanTX.Free(more)
			clear(more)
			return false
		}
		fr.Put(m.Data(), i+1)
		w.putLANEthernet(m, mac, header.EtherTypeIPv4)
	}
	f.SetLen(fr.PutFirst())
	w.putLANEthernet(f, mac, header.EtherTypeIPv4)
	frags[0] = *f
	w.c.fragmented.Add(1)
	w.c.fragments.Add(uint64(k))
	w.transmit(w.lanTX, frags)
	clear(frags)
	return true
}

// mtuErrorTunnel answers the decrypted packet p, too large for the next
// link (mtu bytes), into the tunnel with "fragmentation needed" (IPv4 with
// DF) or "packet too big" (IPv6), from our tunnel address of its family;
// never rate-limited (path MTU discovery).
func (w *worker) mtuErrorTunnel(p []byte, mtu int, now int64) {
	w.icmpTunnel(p, icmpError{kind: icmpTooBig, mtu: mtu}, now)
}

// transitAddrs is header.TransitAddrs as a DropReason: DropMartian or
// DropMulticast for what Linux's forwarding path drops by its addresses,
// DropMartian too for a link-local source beyond its link, which callers
// tell apart (beyondScope, scope.go). Callers ask plainUnicast first,
// which settles the common packet inline.
//
//go:noinline
func transitAddrs(p []byte) (DropReason, bool) {
	switch header.TransitAddrs(p) {
	case header.TransitMartian, header.TransitBeyondScope:
		return DropMartian, false
	case header.TransitMulticast:
		return DropMulticast, false
	}
	return 0, true
}

// plainUnicast is header.PlainUnicast: true settles the packet's
// addresses; false means: ask transitAddrs. Inlined in the hot loops.
func plainUnicast(p []byte) bool { return header.PlainUnicast(p) }

// optionsPlain is header.OptionsPlain: true settles the packet's options;
// false means: ask headerOptions. Inlined in the hot loops.
func optionsPlain(p []byte) bool { return header.OptionsPlain(p) }

// headerOptions is header.TransitOptions as a DropReason (DropIPOptions).
//
//go:noinline
func headerOptions(p []byte) (DropReason, bool) {
	if header.TransitOptions(p) != header.TransitOK {
		return DropIPOptions, false
	}
	return 0, true
}

// rcvDrop6 reports whether Linux's ip6_rcv_core drops the IPv6 packet p
// for its addresses before it reads the hop-by-hop header: a loopback
// source or destination (RFC 4291 §2.5.3), a multicast source, a
// multicast destination of scope 0 or 1 (RFC 4291 §2.7).
func rcvDrop6(p []byte) bool {
	src, dst := p[8:24], p[24:40]
	return src[0] == 0 && binary.BigEndian.Uint64(src[0:8]) == 0 && binary.BigEndian.Uint64(src[8:16]) == 1 ||
		dst[0] == 0 && binary.BigEndian.Uint64(dst[0:8]) == 0 && binary.BigEndian.Uint64(dst[8:16]) == 1 ||
		src[0] == 0xff || dst[0] == 0xff && dst[1]&0x0f <= 1
}

// transitChecks makes every check a transit IP packet p (header checked)
// passes before it is forwarded: its source against the host's own
// addresses of snapshot rt (routeTable.ownSource), its addresses
// (transitAddrs), its options (headerOptions). It
// reports whether p may be forwarded, or why not. Callers ask the inlined
// plainUnicast, optionsPlain and mayOwn first (authenticate asks mayOwn
// once per source), which settle the common packet.
//
//go:noinline
func transitChecks(rt *routeTable, p []byte) (DropReason, bool) {
	if rt.ownSource(p) { // before a broadcast goes to the host: Linux validates its source too
		return DropMartian, false
	}
	// IPv6's hop-by-hop header is judged as the packet is received
	// (ip6_rcv_core), after that function's address checks (rcvDrop6)
	// and before ip6_forward's: a bad option of a packet to a link-local
	// or multicast destination is answered (optionsError).
	if p[0]>>4 == header.IPv6Version && !optionsPlain(p) && !rcvDrop6(p) {
		if why, ok := headerOptions(p); !ok {
			return why, false
		}
	}
	if why, ok := transitAddrs(p); !ok {
		return why, false
	}
	if !optionsPlain(p) {
		return headerOptions(p)
	}
	return 0, true
}

package fastpath

import (
	"net/netip"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/replay"
)

type mail struct {
	kind   mailKind
	ctl    ControlPacket
	inner  []byte
	raw    []byte // a whole frame for the LAN (rawLAN) or WAN port
	rawLAN bool
	// wan is a WireGuard message from wanSrc to wanDst that came through
	// the host kernel (Engine.ReceiveWAN).
	wan            []byte
	wanSrc, wanDst netip.AddrPort
}

// mailKind says which of mail's fields a letter holds: a message may be
// empty (a UDP datagram of no bytes through the kernel), which a nil
// slice cannot tell from none.
type mailKind uint8

const (
	mailControl mailKind = iota // ctl (Engine.Send, SendWait)
	mailInner                   // inner (Engine.SendTunnel)
	mailRaw                     // raw, rawLAN (Engine.SendFrame)
	mailWAN                     // wan, wanSrc, wanDst (Engine.ReceiveWAN)
)

// drainMailbox sends what the control plane posted.
func (w *worker) drainMailbox(now int64) int {
	done := 0
	for done < w.burst {
		var m mail
		select {
		case m = <-w.mailbox:
		default:
			return done
		}
		if done == 0 && w.stalled.Load() {
			w.stalled.Store(false) // taking mail again: SendWait may wait (sendwait.go)
		}
		done++
		switch m.kind {
		case mailWAN:
			w.receiveWAN(&m, now)
		case mailInner:
			w.sendInner(m.inner, true, now)
		case mailRaw:
			tx, vlan := w.wanTX, w.wanVLAN
			if m.rawLAN {
				tx, vlan = w.lanTX, w.lanVLAN
			}
			w.sendRaw(tx, m.raw, vlan)
		default:
			w.sendControl(&m.ctl, now)
		}
	}
	return done
}

// receiveWAN wraps a WireGuard message that came through the host kernel
// (Engine.ReceiveWAN) in a frame (wrapWAN) and handles it as a received
// burst of one.
func (w *worker) receiveWAN(m *mail, now int64) {
	w.c.fromKernel.Add(1)
	if w.wrapWAN(w.injected[:], m.wanSrc, m.wanDst, m.wan) {
		w.rxQueue = replay.AnyQueue // came on no queue
		w.inboundBurst(w.injected[:], now)
		w.rxQueue = w.id
	}
}

// wrapWAN puts msg, the payload of a UDP datagram from src to dst that
// reached the WAN outside the port's frames (through the host kernel, or
// reassembled here), in the Ethernet, IP and UDP headers it arrived with,
// in a frame of the WAN port's pool, into frames[0] (frames of length 1).
// The Ethernet source is unknown (zero): should the peer roam to this
// source, the control plane resolves the next hop's MAC. It returns false, counted (no_buffer,
// wan_too_big), when it has no frame or the datagram does not fit one.
func (w *worker) wrapWAN(frames []dataplane.Frame, src, dst netip.AddrPort, msg []byte) bool {
	ipLen, et := header.IPv4MinLen, uint16(header.EtherTypeIPv4)
	if !src.Addr().Is4() {
		ipLen, et = header.IPv6Len, header.EtherTypeIPv6
	}
	if w.wanTX.Alloc(frames) != 1 {
		w.count(DropNoBuffer, 1)
		return false
	}
	f := &frames[0]
	// With the WAN's tag, as a frame received on the WAN would have.
	l2 := w.wanL2
	n := l2 + ipLen + header.UDPLen + len(msg)
	if !f.SetLen(n) {
		w.count(DropWANTooBig, 1)
		w.wanTX.Free(frames)
		return false
	}
	b := f.Data()
	putEthernet(b, header.MAC(w.wanMAC), header.MAC{}, w.wanVLAN, et)
	l4 := b[l2+ipLen:]
	if src.Addr().Is4() {
		ip := header.IPv4Fields{Protocol: header.ProtoUDP, TTL: 64, Src: src.Addr().As4(), Dst: dst.Addr().As4()}
		header.PutIPv4(b[l2:], &ip, header.UDPLen+len(msg))
	} else {
		ip := header.IPv6Fields{NextHeader: header.ProtoUDP, HopLimit: 64, Src: src.Addr().As16(), Dst: dst.Addr().As16()}
		header.PutIPv6(b[l2:], &ip, header.UDPLen+len(msg))
	}
	header.PutUDP(l4, src.Port(), dst.Port(), len(msg))
	copy(l4[header.UDPLen:], msg)
	if !src.Addr().Is4() {
		// UDP over IPv6 needs its checksum (RFC 8200 §8.1).
		u := header.UDP(l4[:header.UDPLen+len(msg)])
		u.SetChecksum(header.PseudoHeaderChecksum(header.ProtoUDP, src.Addr(), dst.Addr(), u.Length()))
	}
	return true
}

// sendControl builds a frame for a control-plane packet and transmits it.
func (w *worker) sendControl(c *ControlPacket, now int64) {
	// An IPv4-mapped destination (the UAPI keeps an endpoint as written,
	// [::ffff:a.b.c.d]:port) is sent as IPv4, as wrap's template sends
	// transport data to it: such an address never appears in an IPv6
	// header (RFC 4291 section 2.5.5.2).
	dst := netip.AddrPortFrom(c.Dst.Addr().Unmap(), c.Dst.Port())
	ep := Endpoint{Dst: dst, Src: w.wan.source(c.Src, dst.Addr()), DstMAC: c.DstMAC, SrcMAC: w.wanMAC}
	if !ep.Src.IsValid() {
		w.count(DropNoWANAddress, 1)
		return
	}
	resolved := true
	if ep.DstMAC == ([6]byte{}) {
		ep.DstMAC, resolved = w.e.cfg.WANResolver.Resolve(dst.Addr())
	}
	var fr [1]dataplane.Frame
	if w.wanTX.Alloc(fr[:]) == 0 {
		w.count(DropNoBuffer, 1)
		return
	}
	f := &fr[0]
	hdr := w.outerLen(&ep)
	if !f.SetLen(hdr + len(c.Payload)) {
		w.count(DropNoBuffer, 1)
		w.wanTX.Free(fr[:])
		return
	}
	b := f.Data()
	copy(b[hdr:], c.Payload)
	port := c.SrcPort
	if port == 0 {
		port = w.wan.port
	}
	w.putOuter(b, &ep, port, len(c.Payload))
	if ep.Dst.Addr().Is6() || w.e.cfg.IPv4UDPChecksum {
		w.udpChecksum(b, &ep)
	}
	if c.Peer != nil {
		pl := w.peerState(c.Peer)
		pl.sentAt = w.stamp(now)
		w.markDirty(pl)
	}
	if !resolved {
		// The next hop is being resolved: wait for it, as LAN packets
		// do, rather than lose a handshake to a cold neighbour cache.
		w.waitControl(f, dst.Addr(), c.Peer, len(c.Payload))
		return
	}
	w.c.controlSent.Add(1)
	w.sentControl(fr[:], c.Peer, len(c.Payload))
}

// sentControl transmits fr, a control-plane frame for peer (nil: none)
// with an n-byte UDP payload, and counts the payload in the peer's
// tx_bytes once the WAN port took it: as the kernel and wireguard-go
// count a message when the socket took it, so that `wg show` says
// nothing was sent of a handshake toward an endpoint without a route
// (no_wan_route, after its wait) or that found the ring full (one whose
// next hop's MAC never came is counted, as Linux counts it: countSent).
// The attempt's time (lastSent) is the caller's: their
// timers take it whether or not the message left.
func (w *worker) sentControl(fr []dataplane.Frame, peer *Peer, n int) {
	if w.toWAN(fr, false) == 1 {
		w.countSent(peer, n)
	}
}

// putOuter writes Ethernet, IP and UDP headers for a UDP payload of n
// bytes into b (which must hold the outer headers, payload following).
func (w *worker) putOuter(b []byte, ep *Endpoint, srcPort uint16, n int) {
	dst := ep.Dst.Addr()
	l2 := w.wanL2
	if dst.Is4() {
		putEthernet(b, header.MAC(ep.DstMAC), header.MAC(ep.SrcMAC), w.wanVLAN, header.EtherTypeIPv4)
		w.ipID += w.ipStep
		f := header.IPv4Fields{Protocol: header.ProtoUDP, ID: w.ipID, Src: ep.Src.As4(), Dst: dst.As4()}
		header.PutIPv4(b[l2:], &f, header.UDPLen+n)
		header.PutUDP(b[l2+header.IPv4MinLen:], srcPort, ep.Dst.Port(), n)
		return
	}
	putEthernet(b, header.MAC(ep.DstMAC), header.MAC(ep.SrcMAC), w.wanVLAN, header.EtherTypeIPv6)
	f := header.IPv6Fields{NextHeader: header.ProtoUDP, Src: ep.Src.As16(), Dst: dst.As16()}
	header.PutIPv6(b[l2:], &f, header.UDPLen+n)
	header.PutUDP(b[l2+header.IPv6Len:], srcPort, ep.Dst.Port(), n)
}

func (w *worker) udpChecksum(b []byte, ep *Endpoint) {
	off := w.wanL2 + header.IPv4MinLen
	if ep.Dst.Addr().Is6() {
		off = w.wanL2 + header.IPv6Len
	}
	u := header.UDP(b[off:])
	pseudo := header.PseudoHeaderChecksum(header.ProtoUDP, ep.Src, ep.Dst.Addr(), u.Length())
	u.SetChecksum(pseudo)
}

// limitedBroadcast is 255.255.255.255 (RFC 919).
var limitedBroadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// sendInner encrypts an inner packet from the exception interface
// (fromHost: the host's, Engine.SendTunnel) or one of the worker's own
// ICMP errors into the tunnel. A packet from the host that no peer takes
// (no_route), or whose peer has no endpoint (no_endpoint), is answered
// with host unreachable (icmpKernel), as Linux's wg0 answers it
// (icmperr.go). An IPv6 packet while the tunnel carries none (Engine.no6)
// is dropped unanswered (ipv6_off): the host's kernel routes none into an
// exception TUN of that MTU, so only a library caller's gets here.
func (w *worker) sendInner(p []byte, fromHost bool, now int64) {
	rt := w.e.routes.Load()
	if header.ParseL3(p, &w.pkt) != header.OK {
		w.count(DropInnerMalformed, 1)
		return
	}
	if w.pkt.Dst.Is6() && w.e.no6() {
		w.count(DropIPv6Off, 1)
		return
	}
	peer, ok := rt.t.Lookup(w.pkt.Dst)
	if !ok {
		// The host's multicast and broadcast (limited, or a directed
		// broadcast of the tunnel's subnets, among our own addresses:
		// the host's packets to its unicast ones never leave it) get no
		// error (RFC 1122 §3.2.2; Linux's __icmp_send for a broadcast
		// or multicast route) and are counted apart from no_route,
		// which operators watch.
		if d := w.pkt.Dst; d.IsMulticast() || d == limitedBroadcast || rt.isOwn(d) {
			w.count(DropHostMulticast, 1)
		} else {
			w.count(DropNoRoute, 1)
			if fromHost {
				w.icmpKernel(p, icmpError{kind: icmpUnreachable}, now)
			}
		}
		return
	}
	if len(p) > w.e.cfg.MTU {
		w.count(DropTooBig, 1)
		return
	}
	var fr [1]dataplane.Frame
	if w.lanTX.Alloc(fr[:]) == 0 {
		w.count(DropNoBuffer, 1)
		return
	}
	f := &fr[0]
	f.SetLen(len(p))
	copy(f.Data(), p)
	pl := w.peerState(peer)
	kp, ep := usable(peer, now)
	if kp == nil {
		if peer.Endpoint.Load() == nil && !peer.Removed.Load() {
			w.count(DropNoEndpoint, 1)
			w.lanTX.Free(fr[:])
			if fromHost {
				w.icmpKernel(p, icmpError{kind: icmpUnreachable}, now)
			}
			return
		}
		w.hold(pl, f, now)
		return
	}
	first, granted := kp.ReserveNonces(1)
	if granted == 0 {
		w.count(DropNonceExhausted, 1)
		w.ask(peer, &peer.HandshakeNeeded, true)
		w.lanTX.Free(fr[:])
		return
	}
	sealed := w.seal(f, pl, kp, ep, first)
	if !sealed {
		w.count(DropNoBuffer, 1)
		w.lanTX.Free(fr[:])
		return
	}
	st := w.stamp(now)
	pl.sentAt, pl.dataSentAt = st, st
	msg := f.Len() - w.outerLen(ep)
	addTx(pl, msg)
	w.markDirty(pl)
	w.c.encrypted.Add(1)
	w.c.encryptedBytes.Add(uint64(len(p)))
	if w.toWAN(fr[:], true) == 0 {
		pl.txBytes -= int32(msg) // refused (ring_full): not sent (notSent)
	}
}

// sendRaw copies a whole untagged frame from the control plane into a frame
// of tx's pool and transmits it on that port of vlan (tagged if not 0).
func (w *worker) sendRaw(tx dataplane.TX, raw []byte, vlan uint16) {
	var fr [1]dataplane.Frame
	if dataplane.CopyFrame(tx, fr[:], raw) != nil {
		w.count(DropNoBuffer, 1)
		return
	}
	if vlan != 0 && !tagFrame(&fr[0], vlan) {
		w.count(DropNoBuffer, 1)
		tx.Free(fr[:])
		return
	}
	w.c.controlSent.Add(1)
	w.transmit(tx, fr[:])
}

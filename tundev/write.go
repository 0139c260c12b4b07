package tundev

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// takeTX returns the TX queue of the flow of pkt (FlowHash), with its
// mutex held. A flow always takes the same queue, as on a kernel
// multi-queue TUN: wireguard-go writes a peer's packets in order, and
// spreading one flow over queues would reorder it wherever the queues are
// merged again (the host's RX queues, a NIC's TX rings).
func (d *PortDevice) takeTX(pkt []byte) *portTX {
	q := d.txqs[d.txIndex(pkt)]
	q.mu.Lock()
	return q
}

// txIndex is the TX queue of pkt's flow.
func (d *PortDevice) txIndex(pkt []byte) int {
	if n := uint32(len(d.txqs)); n > 1 {
		return int(FlowHash(pkt) % n)
	}
	return 0
}

// Write sends each bufs[i][offset:] (an IPv4 or IPv6 packet, cut to its
// length field: ipPacketOf) in an Ethernet
// frame from the port's MAC to the MAC of its next hop, and returns
// len(bufs) with a nil error once every packet is sent or dropped (one
// larger than the LAN MTU, SetLANMTU, is fragmented or answered, and so is
// one going back into the tunnel larger than the tunnel MTU: lanmtu.go):
// packets that cannot be sent (not IP, shorter than their length field,
// too big, refused by the
// router's checks or at TTL 1 (router.go), for the host itself
// (SetHostAddrs), routed off the LAN (PortConfig.LANIndex), no route, an
// unresolved next hop, no buffer, a full TX ring) are dropped and counted,
// as a kernel interface drops them, so that one bad packet does not make
// wireguard-go log every batch. A packet's TTL or hop limit and a SYN's
// MSS are changed in place in bufs; one for a peer's allowed IPs (by a
// longer prefix than the LAN's route: SetAllowedIPs) goes back to Read
// instead of the LAN. The routes are read from one snapshot per call
// (PortConfig.Routes' Table). Safe for concurrent use; it does not keep
// bufs and allocates nothing on the hot path. After Close it returns 0,
// os.ErrClosed.
func (d *PortDevice) Write(bufs [][]byte, offset int) (int, error) {
	if d.closed.Load() {
		return 0, os.ErrClosed
	}
	var macs [PortBatchSize]header.MAC
	var ok, loop [PortBatchSize]bool
	// The batch's IP packets, each cut to its length (nil: dropped), in
	// the caller's buffers.
	var pkts [PortBatchSize][]byte
	al, hosts, lanMTU := d.allowed.Load(), d.hosts.Load(), int(d.lanMTU.Load())
	tab := d.cfg.Routes.Table()
	var lastTun lastRoute
	for done := 0; done < len(bufs); {
		chunk := bufs[done:min(len(bufs), done+PortBatchSize)]
		var last netip.Addr
		var lastMAC header.MAC
		lastOK, lastReason, loops := false, PortDropNoRoute, 0
		for i, b := range chunk {
			ok[i], loop[i], pkts[i] = false, false, nil
			if offset > len(b) {
				d.ctr.drops[PortDropMalformed].Add(1)
				continue
			}
			pkt, dst, good := ipPacketOf(b[offset:])
			if !good {
				d.ctr.drops[PortDropMalformed].Add(1)
				continue
			}
			pkts[i] = pkt
			switch d.forwardOut(pkt, dst, al, hosts, tab, &lastTun) {
			case outLoop:
				switch {
				case len(pkt) <= d.cfg.MTU:
					loop[i] = true
					loops++
				case !fragmentable(pkt):
					d.tooBig(pkt, d.cfg.MTU, al)
				default:
					// After the peer-to-peer packets before it,
					// in order: queue those first (a rare path).
					d.loop.push(d, pkts[:i], 0, loop[:i])
					clear(loop[:i])
					loops = 0
					d.loop.pushFragments(d, pkt, d.cfg.MTU)
				}
				continue
			case outDropped:
				continue
			}
			big := len(pkt) > lanMTU
			if big && !fragmentable(pkt) {
				if d.lanBroadcast(pkt) {
					// No error answers a broadcast (RFC
					// 1812 §4.3.2.7): dropped as within
					// the MTU, unanswered.
					d.ctr.drops[PortDropTooBig].Add(1)
				} else {
					d.tooBig(pkt, lanMTU, al)
				}
				continue
			}
			mac, good := lastMAC, lastOK
			if dst != last {
				var r PortDropReason
				mac, r = d.nextHop(dst, lastTun.rt, lastTun.found)
				good = r == NumPortDropReasons
				last, lastMAC, lastOK, lastReason = dst, mac, good, r
			}
			switch {
			case !good:
				d.dropOut(pkt, lastReason, al)
			case big:
				// After the packets before it, in order: send
				// those first (a rare path).
				d.send(pkts[:i], 0, macs[:i], ok[:i])
				clear(ok[:i])
				d.fragmentLAN(pkt, mac, lanMTU)
			default:
				macs[i], ok[i] = mac, true
			}
		}
		if loops > 0 {
			d.loop.push(d, pkts[:len(chunk)], 0, loop[:len(chunk)])
		}
		d.send(pkts[:len(chunk)], 0, macs[:len(chunk)], ok[:len(chunk)])
		done += len(chunk)
	}
	return len(bufs), nil
}

// ipPacketOf returns the IP packet at the start of b cut to its length
// field (IPv4 total length, IPv6 40 bytes and the payload length) and its
// destination, as Linux's ip_rcv_core and ipv6_rcv trim what a device
// hands them before anything judges the packet's length (the MTU
// checks): bytes past it are not the packet's, and are neither sent nor
// counted against an MTU. False, for Write to drop as malformed (Linux
// counts InTruncatedPkts or InHdrErrors), when b is no IPv4 or IPv6
// packet, shorter than its header or than its length field, or an IPv4
// total length is shorter than the header. (wireguard-go trims what it
// decrypts so before it writes: this holds Write to the contract for any
// caller.)
func ipPacketOf(b []byte) (pkt []byte, dst netip.Addr, ok bool) {
	if len(b) < 1 {
		return nil, netip.Addr{}, false
	}
	switch b[0] >> 4 {
	case header.IPv4Version:
		if len(b) < header.IPv4MinLen {
			return nil, netip.Addr{}, false
		}
		n := int(binary.BigEndian.Uint16(b[2:4]))
		if n < header.IPv4MinLen || n < int(b[0]&0xf)*4 || n > len(b) {
			return nil, netip.Addr{}, false
		}
		return b[:n], netip.AddrFrom4([4]byte(b[16:20])), true
	case header.IPv6Version:
		if len(b) < header.IPv6Len {
			return nil, netip.Addr{}, false
		}
		n := header.IPv6Len + int(binary.BigEndian.Uint16(b[4:6]))
		if n > len(b) {
			return nil, netip.Addr{}, false
		}
		return b[:n], netip.AddrFrom16([16]byte(b[24:40])), true
	}
	return nil, netip.Addr{}, false
}

// destination returns an IP packet's destination address.
func destination(pkt []byte) (netip.Addr, bool) {
	if len(pkt) < 1 {
		return netip.Addr{}, false
	}
	switch pkt[0] >> 4 {
	case 4:
		if len(pkt) < header.IPv4MinLen {
			return netip.Addr{}, false
		}
		return netip.AddrFrom4([4]byte(pkt[16:20])), true
	case 6:
		if len(pkt) < header.IPv6Len {
			return netip.Addr{}, false
		}
		return netip.AddrFrom16([16]byte(pkt[24:40])), true
	}
	return netip.Addr{}, false
}

// nextHop returns the MAC of dst's next hop by r, the route toward dst
// (found false: none; forwardOut's), or a drop reason
// (NumPortDropReasons on success): no_route for none, or one that sends
// nowhere (IfIndex -1: unreachable, blackhole), as Resolver.NextHop
// answers.
func (d *PortDevice) nextHop(dst netip.Addr, r arp.Route, found bool) (header.MAC, PortDropReason) {
	if !found || r.IfIndex < 0 {
		return header.MAC{}, PortDropNoRoute
	}
	nh := r.NextHop(dst)
	if mac, ok := d.cfg.Neighbours.Lookup(nh); ok {
		return header.MAC(mac), NumPortDropReasons
	}
	deadline := time.Now().Add(d.cfg.ResolveWait)
	for sleep := 100 * time.Microsecond; ; sleep = min(2*sleep, 10*time.Millisecond) {
		switch d.cfg.Neighbours.Resolve(nh) {
		case arp.StateFailed, arp.StateNone:
			return header.MAC{}, PortDropNoNeighbour
		}
		if mac, ok := d.cfg.Neighbours.Lookup(nh); ok {
			return header.MAC(mac), NumPortDropReasons
		}
		if time.Now().After(deadline) || d.closed.Load() {
			return header.MAC{}, PortDropNoNeighbour
		}
		time.Sleep(sleep)
	}
}

// send transmits the packets marked ok, each on the TX queue of its flow
// (txIndex): one lock per queue the batch touches.
func (d *PortDevice) send(bufs [][]byte, offset int, macs []header.MAC, ok []bool) {
	if len(d.txqs) == 1 {
		d.sendOn(d.txqs[0], bufs, offset, macs, ok)
		return
	}
	// Mark each packet with its queue; send queue by queue, each
	// queue's packets in the batch's order.
	var qi [PortBatchSize]int
	var sel [PortBatchSize]bool
	left := 0
	for i, o := range ok {
		if o {
			qi[i] = d.txIndex(bufs[i][offset:])
			left++
		}
	}
	for q := 0; left > 0 && q < len(d.txqs); q++ {
		n := 0
		for i, o := range ok {
			sel[i] = o && qi[i] == q
			if sel[i] {
				n++
			}
		}
		if n > 0 {
			d.sendOn(d.txqs[q], bufs, offset, macs, sel[:len(ok)])
			left -= n
		}
	}
}

// sendOn builds and transmits the packets marked ok on TX queue q.
func (d *PortDevice) sendOn(q *portTX, bufs [][]byte, offset int, macs []header.MAC, ok []bool) {
	want := 0
	for _, o := range ok {
		if o {
			want++
		}
	}
	if want == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	got := q.tx.Alloc(q.frames[:want])
	if got < want {
		d.ctr.drops[PortDropNoBuffer].Add(uint64(want - got))
	}
	k := 0
	for i, b := range bufs {
		if !ok[i] || k == got {
			continue
		}
		pkt := b[offset:]
		f := &q.frames[k]
		if !f.SetLen(header.EthernetLen + len(pkt)) {
			d.ctr.drops[PortDropTooBig].Add(1)
			continue
		}
		data := f.Data()
		et := uint16(header.EtherTypeIPv4)
		if pkt[0]>>4 == 6 {
			et = header.EtherTypeIPv6
		}
		header.PutEthernet(data, macs[i], d.mac, et)
		copy(data[header.EthernetLen:], pkt)
		k++
	}
	if k < got {
		q.tx.Free(q.frames[k:got])
	}
	sent := 0
	for tries := 0; sent < k && tries < 4; tries++ {
		m := q.tx.Transmit(q.frames[sent:k])
		if m == 0 {
			q.tx.Reclaim()
		}
		sent += m
	}
	if sent < k {
		d.ctr.drops[PortDropTXFull].Add(uint64(k - sent))
		q.tx.Free(q.frames[sent:k])
	}
	d.ctr.tx.Add(uint64(sent))
	clear(q.frames[:got])
}

// SendFrame transmits one whole Ethernet frame (owned mode: an
// arp.FrameProber's request, a Responder's answer or announcement) on some
// TX queue. It copies frame. The error wraps dataplane.ErrNoFreeFrame or
// ErrFrameTooLong (the frame is dropped and counted); a full TX ring is
// counted, not an error. Safe for concurrent use; it may be called with
// the neighbour table's lock held, but not from inside Write.
func (d *PortDevice) SendFrame(frame []byte) error {
	q := d.takeTX(nil)
	defer q.mu.Unlock()
	switch err := dataplane.SendCopy(q.tx, q.frames[:1], frame); err {
	case dataplane.ErrNoFreeFrame:
		d.ctr.drops.Add(PortDropNoBuffer, 1)
		return fmt.Errorf("tundev: send frame: %w", err)
	case dataplane.ErrFrameTooLong:
		d.ctr.drops.Add(PortDropTooBig, 1)
		return fmt.Errorf("tundev: send frame of %d bytes: %w", len(frame), err)
	case dataplane.ErrRingFull:
		d.ctr.drops.Add(PortDropTXFull, 1) // counted, as a full qdisc drops
	}
	return nil
}

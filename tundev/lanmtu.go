package tundev

import (
	"fmt"
	"os"

	"github.com/gaissmai/bart"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// A decrypted packet Write forwards is held to the MTU of its way out as
// Linux's ip_forward and ip6_forward hold a packet to its route's device:
// after the TTL check, an IPv4 packet without DF is cut into fragments of
// the MTU (RFC 791 §3.2, RFC 1812 §5.2.6), and one with DF or an IPv6
// packet (never fragmented in transit, RFC 8200 §5) is dropped (too_big)
// and answered into the tunnel with "fragmentation needed" (RFC 1191) /
// "packet too big" (RFC 8201) carrying the MTU, never rate-limited
// (icmpAllowed), quoting the packet as it arrived (tooBig); one to the
// LAN's directed broadcast address is not answered (RFC 1812 §4.3.2.7,
// lanBroadcast), as within the MTU. The way out is
//
//   - the LAN (lanMTU: the port's MTU, then SetLANMTU's, which a gateway
//     keeps the LAN interface's of the moment): with a tunnel MTU above
//     the LAN's (jumbo frames on the WAN) this is every large packet;
//     fragmentLAN sends the fragments, after the batch's packets before
//     it, on its flow's TX queue, before the next hop's resolution as in
//     Linux;
//   - or the tunnel again, a peer-to-peer packet (Linux routes it back
//     out of wg0, whose MTU is PortConfig.MTU): a peer with a larger
//     tunnel MTU than ours sends them; loopQueue.pushFragments queues the
//     fragments for Read, after the batch's peer-to-peer packets before
//     it. Before, such a packet up to the LAN MTU went back to
//     wireguard-go whole, over the tunnel MTU, and one past it was
//     dropped unanswered.

// SetLANMTU sets the MTU Write holds decrypted packets to the LAN to, in
// bytes (PortConfig.Port's MTU until then): a gateway calls it when the
// LAN interface's MTU changes (ip link set dev lan mtu 1400), as Linux
// checks a packet against its outgoing device's MTU of the moment. It
// returns an error, changing nothing, for an MTU below 68 (RFC 791 §3.2:
// every IPv4 link carries 68 bytes) or above the port's MTU of the
// moment, past which the port sends no frame (dataplane.Port.MTU): to
// raise it, raise the port's first (afxdp.Port.SetMTU). After Close it
// returns an error wrapping os.ErrClosed, as Read and Write. Safe for
// concurrent use with Write: a Write in progress keeps the MTU it started
// with.
func (d *PortDevice) SetLANMTU(mtu int) error {
	if d.closed.Load() {
		return fmt.Errorf("tundev: set LAN MTU %d: %w", mtu, os.ErrClosed)
	}
	if mtu < header.IPv4MinMTU || mtu > d.cfg.Port.MTU() {
		return fmt.Errorf("tundev: LAN MTU %d outside [%d, %d] (the port's MTU: it sends no longer frame)", mtu, header.IPv4MinMTU, d.cfg.Port.MTU())
	}
	d.lanMTU.Store(int32(mtu))
	return nil
}

// LANMTU returns the MTU Write holds decrypted packets to the LAN to
// (SetLANMTU).
func (d *PortDevice) LANMTU() int { return int(d.lanMTU.Load()) }

// fragmentable reports whether pkt, a decrypted packet over an MTU, may be
// cut into fragments: IPv4 without DF.
func fragmentable(pkt []byte) bool {
	return pkt[0]>>4 == header.IPv4Version && !header.IPv4(pkt).DontFragment()
}

// tooBig drops pkt, a decrypted packet over the MTU mtu of its way out
// that may not be fragmented (forwardOut took its hop), and answers it
// into the tunnel with mtu.
func (d *PortDevice) tooBig(pkt []byte, mtu int, al *bart.Table[uint8]) {
	d.ctr.drops[PortDropTooBig].Add(1)
	header.RestoreHop(pkt) // Linux checks the MTU before the hop
	d.icmpErrorTunnel(pkt, icmpError{kind: icmpTooBig, mtu: mtu}, al)
}

// fragmentDrop counts a packet header.IPv4Fragmenter.Reset refused for
// r: too_big when mtu holds no fragment of its header with 8 data bytes,
// else malformed (a fragment whose pieces would start past the largest
// offset, or a header Write's checks let through that Reset refuses).
func (d *PortDevice) fragmentDrop(r header.Reason) {
	if r == header.ReasonBufferTooSmall {
		d.ctr.drops[PortDropTooBig].Add(1)
	} else {
		d.ctr.drops[PortDropMalformed].Add(1)
	}
}

// fragmentLAN sends pkt, an IPv4 packet without DF over the LAN MTU mtu,
// as fragments of at most mtu to mac, on its flow's TX queue (the
// fragments of a packet stay in order; Write sends the packets before it
// first), counting it in Fragmented. A packet that needs more fragments
// than a batch holds, or whose header leaves no room for 8 data bytes, is
// dropped (too_big); one whose pieces would start past the largest
// fragment offset (RFC 791 §3.1) as malformed (fragmentDrop). Fragment 0 is pkt's header rewritten in place, last
// (header.IPv4Fragmenter.PutFirst: it keeps the options the others do not
// copy).
func (d *PortDevice) fragmentLAN(pkt []byte, mac header.MAC, mtu int) {
	var fr header.IPv4Fragmenter
	if r := fr.Reset(pkt, mtu); r != header.OK {
		d.fragmentDrop(r)
		return
	}
	q := d.takeTX(pkt)
	defer q.mu.Unlock()
	n := fr.Count()
	if n > len(q.frames) {
		d.ctr.drops[PortDropTooBig].Add(1)
		return
	}
	if got := q.tx.Alloc(q.frames[:n]); got < n {
		q.tx.Free(q.frames[:got])
		d.ctr.drops[PortDropNoBuffer].Add(1)
		return
	}
	for i := range n {
		if !q.frames[i].SetLen(header.EthernetLen + fr.Len(i)) {
			q.tx.Free(q.frames[:n])
			d.ctr.drops[PortDropTooBig].Add(1)
			return
		}
		data := q.frames[i].Data()
		header.PutEthernet(data, mac, d.mac, header.EtherTypeIPv4)
		if i > 0 {
			fr.Put(data[header.EthernetLen:], i)
		}
	}
	copy(q.frames[0].Data()[header.EthernetLen:], pkt[:fr.PutFirst()])
	sent := dataplane.TransmitRetry(q.tx, q.frames[:n])
	if sent < n { // the packet is lost: counted once, tx_full
		d.ctr.drops[PortDropTXFull].Add(1)
		q.tx.Free(q.frames[sent:n])
	} else {
		d.ctr.fragmented.Add(1)
	}
	d.ctr.tx.Add(uint64(sent))
	clear(q.frames[:n])
}

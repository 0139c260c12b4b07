package tundev

import (
	"github.com/gaissmai/bart"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// A decrypted packet Write forwards to the LAN is held to the port's MTU
// (maxLen) as Linux's ip_forward and ip6_forward hold a packet to its
// route's: after the TTL check and before the next hop's resolution, an
// IPv4 packet without DF is cut into fragments of the MTU (RFC 791 §3.2,
// fragmentLAN), and one with DF or an IPv6 packet (never fragmented in
// transit, RFC 8200 §5) is dropped (too_big) and answered into the tunnel
// with "fragmentation needed" (RFC 1191) / "packet too big" (RFC 8201)
// carrying the MTU, never rate-limited, quoting the packet as it arrived
// (tooBigLAN). With a tunnel MTU above the LAN's (jumbo frames on the
// WAN) this is every large packet; without it, wireguard-go's writes
// always fit.

// fragmentable reports whether pkt, a decrypted packet over the port's
// MTU, may be cut into fragments: IPv4 without DF.
func (d *PortDevice) fragmentable(pkt []byte) bool {
	return pkt[0]>>4 == header.IPv4Version && !header.IPv4(pkt).DontFragment()
}

// tooBigLAN drops pkt, a decrypted packet over the port's MTU that may not
// be fragmented (forwardOut took its hop), and answers it into the tunnel.
func (d *PortDevice) tooBigLAN(pkt []byte, al *bart.Table[uint8]) {
	d.ctr.drops[PortDropTooBig].Add(1)
	header.RestoreHop(pkt) // Linux checks the MTU before the hop
	d.icmpErrorTunnel(pkt, icmpError{kind: icmpTooBig, mtu: d.maxLen}, al)
}

// fragmentLAN sends pkt, an IPv4 packet without DF over the port's MTU,
// as fragments of at most the MTU to mac, on its flow's TX queue (the
// fragments of a packet stay in order; Write sends the packets before it
// first), counting it in Fragmented. A
// packet that needs more fragments than a batch holds, or whose header
// leaves no room for 8 data bytes, is dropped (too_big).
func (d *PortDevice) fragmentLAN(pkt []byte, mac header.MAC) {
	var fr header.IPv4Fragmenter
	if fr.Reset(pkt, d.maxLen) != header.OK {
		d.ctr.drops[PortDropTooBig].Add(1)
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
		f := &q.frames[i]
		if !f.SetLen(header.EthernetLen + fr.Len(i)) {
			q.tx.Free(q.frames[:n])
			d.ctr.drops[PortDropTooBig].Add(1)
			return
		}
		data := f.Data()
		header.PutEthernet(data, mac, d.mac, header.EtherTypeIPv4)
		fr.Put(data[header.EthernetLen:], i)
	}
	sent := dataplane.TransmitRetry(q.tx, q.frames[:n])
	if sent < n {
		d.ctr.drops[PortDropTXFull].Add(1)
		q.tx.Free(q.frames[sent:n])
	}
	d.ctr.fragmented.Add(1)
	d.ctr.tx.Add(uint64(sent))
	clear(q.frames[:n])
}

package tundev

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/header"
)

// TestPortDevicePeerToPeerOverMTU: a decrypted packet routed back into the
// tunnel (peer A to peer B) larger than the tunnel MTU (1420; the LAN's is
// 1500) is held to it as Linux holds a packet forwarded out of wg0 to
// wg0's MTU: IPv4 without DF comes out of Read as fragments of at most
// 1420 bytes that reassemble to it (the hop taken), after the peer-to-peer
// packet written before it and before the one after; IPv4 with DF and IPv6,
// over the LAN MTU or not, are dropped (too_big) and answered into the
// tunnel with "fragmentation needed" / "packet too big" carrying 1420 from
// our tunnel address, quoting the packet as it arrived. Before, those up
// to the LAN MTU went back to wireguard-go whole, over the tunnel MTU, and
// those past it were dropped unanswered.
func TestPortDevicePeerToPeerOverMTU(t *testing.T) {
	r := routerRig(t, nil) // tunnel MTU 1420, LAN MTU 1500
	const off = 16
	first := ipPacket(peerA, peerB, []byte("first"))
	noDF := bigPacket(peerA, peerB, 1972, false, 1) // 2000 bytes
	df := bigPacket(peerA, peerB, 1432, true, 2)    // 1460: within the LAN MTU
	dfHuge := bigPacket(peerA, peerB, 1972, true, 3)
	v6 := bigPacket(peerA6, peerB6, 1412, false, 4) // 1460
	last := ipPacket(peerA, peerB, []byte("last"))
	var bufs [][]byte
	for _, p := range [][]byte{first, noDF, df, dfHuge, v6, last} {
		bufs = append(bufs, append(make([]byte, off), p...))
	}
	if n, err := r.dev.Write(bufs, off); n != len(bufs) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	// Read blocks while nothing waits: ask only for what is queued.
	if n := r.dev.loop.n.Load(); n != 7 {
		t.Fatalf("%d packets wait for Read, want 7: first, 2 fragments, 3 errors, last (stats %+v)", n, r.dev.Stats())
	}
	got := r.readAll(t, 7, 8)
	var flow, errs [][]byte
	for _, p := range got {
		if len(p) > 1420 {
			t.Errorf("Read a %d-byte packet, over the tunnel MTU 1420", len(p))
		}
		var pk header.Packet
		if header.ParseIP(p, &pk) == header.OK && (pk.Src == tunIP || pk.Src == tunIP6) {
			errs = append(errs, p)
		} else {
			flow = append(flow, p)
		}
	}
	if len(flow) != 4 || len(errs) != 3 {
		t.Fatalf("Read %d packets of the flow and %d errors, want 4 (first, 2 fragments, last) and 3 (stats %+v)", len(flow), len(errs), r.dev.Stats())
	}
	if !bytes.Equal(flow[0], hop(first)) || !bytes.Equal(flow[3], hop(last)) {
		t.Errorf("flow read as %d, %d, %d, %d bytes; want the first packet (%d), 2 fragments, the last (%d), in that order",
			len(flow[0]), len(flow[1]), len(flow[2]), len(flow[3]), len(first), len(last))
	}
	if p := reassembleIPv4(t, flow[1:3], 1420); !bytes.Equal(p, hop(noDF)) {
		t.Errorf("fragments reassemble to %x..., want %x...", p[:28], hop(noDF)[:28])
	}
	checkTooBig(t, errs[0], tunIP, peerA, 1420, df)
	checkTooBig(t, errs[1], tunIP, peerA, 1420, dfHuge)
	checkTooBig(t, errs[2], tunIP6, peerA6, 1420, v6)
	if s := r.dev.Stats(); s.Drops[PortDropTooBig] != 3 || s.Fragmented != 1 || s.ICMPErrors != 3 || s.PeerToPeer != 3 || s.ICMPSuppressed != 0 || s.TXPackets != 0 {
		t.Errorf("Stats = %+v, want 3 too_big, 1 fragmented, 3 ICMP errors, 3 peer to peer, nothing to the LAN", s)
	}
}

// TestPortDevicePeerToPeerFragmentsFull: a peer-to-peer packet whose
// fragments do not all fit the loop queue's free slots is dropped whole
// (no_buffer), not cut short; the packets queued before it are read.
func TestPortDevicePeerToPeerFragmentsFull(t *testing.T) {
	r := routerRig(t, nil)
	var bufs [][]byte
	for i := range loopSlots - 1 {
		bufs = append(bufs, ipPacket(peerA, peerB, []byte{byte(i)}))
	}
	for i := 0; i < len(bufs); i += PortBatchSize {
		r.dev.Write(bufs[i:min(i+PortBatchSize, len(bufs))], 0)
	}
	r.dev.Write([][]byte{bigPacket(peerA, peerB, 1972, false, 9)}, 0) // 2 fragments, 1 slot free
	if got := r.readAll(t, loopSlots-1, loopSlots); len(got) != loopSlots-1 || r.dev.loop.n.Load() != 0 {
		t.Errorf("Read %d packets, %d left; want the %d queued before, nothing else", len(got), r.dev.loop.n.Load(), loopSlots-1)
	}
	if s := r.dev.Stats(); s.Drops[PortDropNoBuffer] != 1 || s.Fragmented != 0 || s.PeerToPeer != loopSlots-1 {
		t.Errorf("Stats = %+v, want 1 no_buffer, none fragmented, %d peer to peer", s, loopSlots-1)
	}
}

// TestPortDeviceFragmentPastMax: a decrypted fragment over the MTU of its
// way out whose data reach so far past 65,535 bytes (no datagram is that
// long, RFC 791 §3.1) that a piece's offset is past the 13-bit field's
// 65,528 is dropped as malformed, into the tunnel and to the LAN alike.
// Before, that piece's offset wrapped to the start of the datagram: it
// went out naming other bytes than it carried.
func TestPortDeviceFragmentPastMax(t *testing.T) {
	r := routerRig(t, nil) // tunnel MTU 1420, LAN MTU 1500
	for _, dst := range []netip.Addr{peerB, hostIP} {
		p := bigPacket(peerA, dst, 1972, false, 6)  // 2,000 bytes
		binary.BigEndian.PutUint16(p[6:8], 65000/8) // data 65,000 to 66,980: a piece at 66,400
		header.IPv4(p).SetChecksum()
		r.dev.Write([][]byte{p}, 0)
	}
	if n := r.dev.loop.n.Load(); n != 0 {
		t.Errorf("%d packets wait for Read, want none", n)
	}
	if f := r.collect(1); len(f) != 0 {
		t.Errorf("the LAN received %d frames, want none", len(f))
	}
	if s := r.dev.Stats(); s.Drops[PortDropMalformed] != 2 || s.Fragmented != 0 || s.PeerToPeer != 0 {
		t.Errorf("Stats = %+v, want 2 malformed, nothing fragmented", s)
	}
}

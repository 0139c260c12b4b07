package tundev

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/wgpio/wgpio/header"
)

// TestPortDeviceOverLANMTU: a decrypted packet larger than the LAN port's
// MTU (a tunnel MTU above the LAN's) is handled as Linux's ip_forward
// handles it: IPv4 without DF reaches the LAN host as fragments of the
// MTU that reassemble to it (the hop taken), IPv4 with DF and IPv6 are
// dropped (too_big) and answered into the tunnel with "fragmentation
// needed" / "packet too big" carrying the MTU and quoting the packet as it
// arrived. Before, all three were dropped as too_big, unanswered: a path
// MTU black hole.
func TestPortDeviceOverLANMTU(t *testing.T) {
	r := routerRig(t, nil) // the memport LAN: MTU 1500
	const off, size = 16, 2000
	noDF := ipPacket(peerA, hostIP, bytes.Repeat([]byte{7}, size))
	binary.BigEndian.PutUint16(noDF[6:8], 0)
	header.IPv4(noDF).SetChecksum()
	df := ipPacket(peerA, hostIP, bytes.Repeat([]byte{8}, size))
	v6 := ipPacket(peerA6, hostIP6, bytes.Repeat([]byte{9}, size))
	var bufs [][]byte
	for _, p := range [][]byte{noDF, df, v6} {
		bufs = append(bufs, append(make([]byte, off), p...))
	}
	if n, err := r.dev.Write(bufs, off); n != 3 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	frames := r.collect(2)
	var frags [][]byte
	for _, f := range frames {
		frags = append(frags, f[14:])
	}
	if len(frags) != 2 {
		t.Fatalf("LAN received %d frames, want the 2 fragments of the packet without DF", len(frags))
	}
	if got := reassembleIPv4(t, frags, 1500); !bytes.Equal(got, hop(noDF)) {
		t.Errorf("fragments reassemble to %x..., want %x...", got[:28], hop(noDF)[:28])
	}
	if n := r.dev.loop.n.Load(); n != 2 {
		t.Fatalf("%d packets wait for Read, want 2 errors (stats %+v)", n, r.dev.Stats())
	}
	for _, ip := range r.readAll(t, 2, 4) {
		var pk header.Packet
		if rs := header.ParseIP(ip, &pk); rs != header.OK {
			t.Fatalf("error does not parse: %v", rs)
		}
		m := ip[pk.L4Off:]
		src, dst, typ, mtu, quote := tunIP, peerA, uint8(3), uint32(binary.BigEndian.Uint16(m[6:8])), df
		if pk.Dst.Is6() {
			src, dst, typ, mtu, quote = tunIP6, peerA6, 2, binary.BigEndian.Uint32(m[4:8]), v6
		}
		if pk.Src != src || pk.Dst != dst || m[0] != typ || mtu != 1500 || !bytes.Equal(m[8:], quote[:len(m)-8]) {
			t.Errorf("error %v → %v type %d mtu %d quoting %x...; want %v → %v type %d mtu 1500 quoting %x...",
				pk.Src, pk.Dst, m[0], mtu, m[8:36], src, dst, typ, quote[:28])
		}
	}
	if s := r.dev.Stats(); s.Drops[PortDropTooBig] != 2 || s.Fragmented != 1 || s.ICMPErrors != 2 || s.ICMPSuppressed != 0 {
		t.Errorf("Stats = %+v, want 2 too_big, 1 fragmented, 2 ICMP errors", s)
	}
}

// TestPortDeviceFragmentOrder: the fragments of a decrypted packet over the
// LAN port's MTU leave after the packets written before it in the same
// Write, as Linux sends a flow's packets in order (the fast path sends the
// frames before it first too). Before, the fragments went out at once,
// and the batch's earlier packets after them: a flow's packets reordered.
func TestPortDeviceFragmentOrder(t *testing.T) {
	r := routerRig(t, nil) // the memport LAN: MTU 1500, one queue
	const off = 16
	first := ipPacket(peerA, hostIP, []byte("first"))
	big := ipPacket(peerA, hostIP, bytes.Repeat([]byte{7}, 2000))
	binary.BigEndian.PutUint16(big[6:8], 0) // no DF
	header.IPv4(big).SetChecksum()
	last := ipPacket(peerA, hostIP, []byte("last"))
	var bufs [][]byte
	for _, p := range [][]byte{first, big, last} {
		bufs = append(bufs, append(make([]byte, off), p...))
	}
	if n, err := r.dev.Write(bufs, off); n != 3 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	frames := r.collect(4)
	if len(frames) != 4 {
		t.Fatalf("LAN received %d frames, want 4 (stats %+v)", len(frames), r.dev.Stats())
	}
	sizes := make([]int, len(frames))
	for i, f := range frames {
		sizes[i] = len(f) - 14
	}
	if !bytes.Equal(frames[0][14:], hop(first)) || !bytes.Equal(frames[3][14:], hop(last)) {
		t.Errorf("LAN received IP packets of %v bytes, want the first packet (%d), the 2 fragments, the last (%d), in that order",
			sizes, len(first), len(last))
	}
}

// TestPortDeviceICMPLoopFull: an error into the tunnel that finds the loop
// queue full (Read not called; "fragmentation needed" is never
// rate-limited, so a burst of too-big packets fills it) is counted as a
// no_buffer drop, as a packet push finds the queue full is. Before, it
// was lost in no counter.
func TestPortDeviceICMPLoopFull(t *testing.T) {
	r := routerRig(t, nil) // the memport LAN: MTU 1500
	const off, extra = 16, 5
	var bufs [][]byte
	for range loopSlots + extra {
		bufs = append(bufs, append(make([]byte, off), ipPacket(peerA, hostIP, make([]byte, 1600))...))
	}
	for i := 0; i < len(bufs); i += PortBatchSize {
		if _, err := r.dev.Write(bufs[i:min(i+PortBatchSize, len(bufs))], off); err != nil {
			t.Fatal(err)
		}
	}
	s := r.dev.Stats()
	if s.Drops[PortDropTooBig] != loopSlots+extra || s.ICMPErrors != loopSlots || s.Drops[PortDropNoBuffer] != extra {
		t.Errorf("%d too-big packets, Read never called: too_big %d, ICMP errors %d, no_buffer %d; want %d %d %d",
			loopSlots+extra, s.Drops[PortDropTooBig], s.ICMPErrors, s.Drops[PortDropNoBuffer], loopSlots+extra, loopSlots, extra)
	}
}

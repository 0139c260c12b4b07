package tundev

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
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

// checkTooBig checks that ip is "fragmentation needed" (IPv4) or "packet
// too big" (IPv6) from src to dst carrying mtu and quoting quote, the
// packet as it arrived.
func checkTooBig(t *testing.T, ip []byte, src, dst netip.Addr, mtu uint32, quote []byte) {
	t.Helper()
	var pk header.Packet
	if rs := header.ParseIP(ip, &pk); rs != header.OK {
		t.Fatalf("error does not parse: %v", rs)
	}
	m := ip[pk.L4Off:]
	typ, code, got := uint8(3), uint8(4), uint32(binary.BigEndian.Uint16(m[6:8]))
	if pk.Dst.Is6() {
		typ, code, got = 2, 0, binary.BigEndian.Uint32(m[4:8])
	}
	if pk.Src != src || pk.Dst != dst || m[0] != typ || m[1] != code || got != mtu || !bytes.Equal(m[8:], quote[:len(m)-8]) {
		t.Errorf("error %v → %v type %d code %d mtu %d quoting %x...; want %v → %v type %d code %d mtu %d quoting %x...",
			pk.Src, pk.Dst, m[0], m[1], got, m[8:36], src, dst, typ, code, mtu, quote[:28])
	}
}

// TestPortDeviceSetLANMTU: after SetLANMTU(1400) (the LAN interface's MTU
// lowered while running), a decrypted 1460-byte packet to the LAN is held
// to 1400 as Linux holds it to the device's MTU of the moment: without DF
// it reaches the host as fragments of at most 1400 bytes, with DF it is
// answered with "fragmentation needed" carrying 1400; back at 1500 it goes
// whole. An MTU below 68 or above the port's is refused and changes
// nothing. Before, the device kept the port's MTU of its start.
func TestPortDeviceSetLANMTU(t *testing.T) {
	r := routerRig(t, nil) // the memport LAN: MTU 1500
	for _, bad := range []int{0, 67, 1501} {
		if err := r.dev.SetLANMTU(bad); err == nil {
			t.Errorf("SetLANMTU(%d) = nil, want an error", bad)
		}
	}
	if got := r.dev.LANMTU(); got != 1500 {
		t.Fatalf("LANMTU() = %d after refused changes, want the port's 1500", got)
	}
	if err := r.dev.SetLANMTU(1400); err != nil {
		t.Fatal(err)
	}
	const off = 16
	noDF := bigPacket(peerA, hostIP, 1432, false, 1)
	df := bigPacket(peerA, hostIP, 1432, true, 2)
	bufs := [][]byte{append(make([]byte, off), noDF...), append(make([]byte, off), df...)}
	if n, err := r.dev.Write(bufs, off); n != 2 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	var frags [][]byte
	for _, f := range r.collect(2) {
		frags = append(frags, f[header.EthernetLen:])
	}
	if len(frags) != 2 {
		t.Fatalf("LAN received %d frames, want the 2 fragments of the packet without DF (stats %+v)", len(frags), r.dev.Stats())
	}
	if got := reassembleIPv4(t, frags, 1400); !bytes.Equal(got, hop(noDF)) {
		t.Errorf("fragments reassemble to %x..., want %x...", got[:28], hop(noDF)[:28])
	}
	errs := r.readAll(t, 1, 4)
	if len(errs) != 1 {
		t.Fatalf("Read %d packets, want fragmentation needed", len(errs))
	}
	checkTooBig(t, errs[0], tunIP, peerA, 1400, df)
	if err := r.dev.SetLANMTU(1500); err != nil {
		t.Fatal(err)
	}
	whole := bigPacket(peerA, hostIP, 1432, true, 3)
	if n, err := r.dev.Write([][]byte{bytes.Clone(whole)}, 0); n != 1 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if f := r.collect(1); len(f) != 1 || !bytes.Equal(f[0][header.EthernetLen:], hop(whole)) {
		t.Errorf("LAN received %d frames at MTU 1500 again, want the 1460-byte packet whole", len(f))
	}
	if s := r.dev.Stats(); s.Drops[PortDropTooBig] != 1 || s.Fragmented != 1 || s.ICMPErrors != 1 {
		t.Errorf("Stats = %+v, want 1 too_big, 1 fragmented, 1 ICMP error", s)
	}
}

// TestPortDeviceSetLANMTUAfterClose: SetLANMTU after Close returns an
// error wrapping os.ErrClosed, as Read and Write, and changes nothing.
// Before, it returned nil: a gateway that followed the LAN's MTU change
// as it stopped was told the MTU was set.
func TestPortDeviceSetLANMTUAfterClose(t *testing.T) {
	r := routerRig(t, nil)
	if err := r.dev.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.dev.SetLANMTU(1400); !errors.Is(err, os.ErrClosed) || r.dev.LANMTU() != 1500 {
		t.Errorf("SetLANMTU(1400) after Close = %v, LANMTU() = %d; want an error wrapping os.ErrClosed and 1500", err, r.dev.LANMTU())
	}
}

// TestPortDeviceSetLANMTUConcurrent: SetLANMTU while Writes run (go test
// -race sees the MTU's loads and stores): every packet is sent whole or
// as fragments, none lost.
func TestPortDeviceSetLANMTUConcurrent(t *testing.T) {
	r := routerRig(t, nil)
	const writes = 50
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range writes {
			p := bigPacket(peerA, hostIP, 1400, false, uint16(i))
			r.dev.Write([][]byte{p}, 0)
		}
	}()
	for i := 0; ; i++ {
		select {
		case <-done:
			if s := r.dev.Stats(); s.Drops.Total() != 0 || s.TXPackets < writes {
				t.Errorf("Stats = %+v, want %d packets or more sent (fragments), no drops", s, writes)
			}
			return
		default:
		}
		if err := r.dev.SetLANMTU(1000 + i%2*500); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPortDeviceFragmentOptions: the first fragment of a decrypted IPv4
// packet with options that are not copied into fragments (4 NOPs: a
// 24-byte header, the others' 20), fragmented to the LAN MTU, carries the
// packet's header with its options and the data from its start, as RFC
// 791 §3.2 cuts it. Before, Write built fragment 0 like the others (the
// short header, data from 8 bytes too early: 4 bytes of the header
// among it), and the host reassembled a corrupt packet.
func TestPortDeviceFragmentOptions(t *testing.T) {
	r := routerRig(t, nil) // the memport LAN: MTU 1500
	p := withOptions(bigPacket(peerA, hostIP, 1600, false, 7), []byte{1, 1, 1, 1})
	if n, err := r.dev.Write([][]byte{bytes.Clone(p)}, 0); n != 1 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	frames := r.collect(2)
	if len(frames) != 2 {
		t.Fatalf("LAN received %d frames, want 2 fragments (stats %+v)", len(frames), r.dev.Stats())
	}
	f0, f1 := frames[0][header.EthernetLen:], frames[1][header.EthernetLen:]
	if header.IPv4(f0).HeaderLen() != 24 || !bytes.Equal(f0[20:24], p[20:24]) || header.IPv4(f1).HeaderLen() != 20 {
		t.Errorf("fragment headers of %d and %d bytes, the first's options %x; want 24 (options 01010101) and 20",
			header.IPv4(f0).HeaderLen(), header.IPv4(f1).HeaderLen(), f0[20:min(24, len(f0))])
	}
	data := append(bytes.Clone(header.IPv4(f0).Payload()), header.IPv4(f1).Payload()...)
	if !bytes.Equal(data, p[24:]) || header.IPv4(f1).FragmentOffset() != len(header.IPv4(f0).Payload()) {
		t.Errorf("fragments carry %d data bytes %x..., the second at offset %d; want %x... (%d bytes)",
			len(data), data[:16], header.IPv4(f1).FragmentOffset(), p[24:40], len(p)-24)
	}
}

// TestPortDeviceBroadcastOverMTU: a decrypted packet with DF to the LAN's
// directed broadcast address (198.18.11.255 of 198.18.11.0/24) over the
// LAN MTU is dropped (too_big) unanswered: no ICMP error answers a
// packet to a broadcast address (RFC 1812 §4.3.2.7; Linux delivers it to
// itself, bc_forwarding being 0, and forwards nothing to answer), as the
// same packet within the MTU is dropped unanswered (no_neighbour).
// Before, it was answered with "fragmentation needed".
func TestPortDeviceBroadcastOverMTU(t *testing.T) {
	r := routerRig(t, nil) // the memport LAN: MTU 1500
	bcast := netip.MustParseAddr("198.18.11.255")
	r.dev.Write([][]byte{bigPacket(peerA, bcast, 1972, true, 1)}, 0)
	if n := r.dev.loop.n.Load(); n != 0 {
		t.Errorf("%d packets wait for Read, want no error", n)
	}
	if s := r.dev.Stats(); s.Drops[PortDropTooBig] != 1 || s.ICMPErrors != 0 {
		t.Errorf("Stats = %+v, want 1 too_big, no ICMP error", s)
	}
}

// TestPortDeviceWriteTrailingBytes: Write judges a packet by its length
// field, as Linux trims what a device hands it to the IP packet before
// its MTU checks (ip_rcv_core, ipv6_rcv): a buffer with bytes past the
// packet is sent as the packet alone, whole when the packet fits the MTU
// of its way out (the LAN's, or the tunnel's peer to peer) though the
// buffer does not. A buffer shorter than its length field, or an IPv4
// total length shorter than the header, is malformed. Before, the buffer's
// length was judged: such packets with DF or IPv6 were dropped as too_big
// and answered, and the rest went out with the trailing bytes.
func TestPortDeviceWriteTrailingBytes(t *testing.T) {
	r := routerRig(t, nil) // the memport LAN: MTU 1500; the tunnel's 1420
	const off = 16
	trail := bytes.Repeat([]byte{0xee}, 300)
	toLAN4 := ipPacket(peerA, hostIP, bytes.Repeat([]byte{1}, 1400))
	toLAN6 := ipPacket(peerA6, hostIP6, bytes.Repeat([]byte{2}, 1400))
	toPeer := ipPacket(peerA, peerB, bytes.Repeat([]byte{3}, 1350))
	short := ipPacket(peerA, hostIP, bytes.Repeat([]byte{4}, 100))
	binary.BigEndian.PutUint16(short[2:4], uint16(len(short)+1)) // one past the buffer
	header.IPv4(short).SetChecksum()
	below := ipPacket(peerA, hostIP, nil)
	binary.BigEndian.PutUint16(below[2:4], 19)
	header.IPv4(below).SetChecksum()
	var bufs [][]byte
	for _, p := range [][]byte{toLAN4, toLAN6, toPeer} {
		bufs = append(bufs, append(append(make([]byte, off), p...), trail...))
	}
	bufs = append(bufs, append(make([]byte, off), short...), append(make([]byte, off), below...))
	if n, err := r.dev.Write(bufs, off); n != len(bufs) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	frames := r.collect(2)
	if len(frames) != 2 || !bytes.Equal(frames[0][header.EthernetLen:], hop(toLAN4)) || !bytes.Equal(frames[1][header.EthernetLen:], hop(toLAN6)) {
		var sizes []int
		for _, f := range frames {
			sizes = append(sizes, len(f)-header.EthernetLen)
		}
		t.Errorf("LAN received IP packets of %v bytes, want the two packets of 1,428 and 1,448 bytes, hop taken, without what followed them (stats %+v)", sizes, r.dev.Stats())
	}
	if got := r.readAll(t, 1, 4); len(got) != 1 || !bytes.Equal(got[0], hop(toPeer)) {
		t.Errorf("Read = %d packets, want the peer-to-peer packet of %d bytes alone, hop taken", len(got), len(toPeer))
	}
	if s := r.dev.Stats(); s.Drops[PortDropMalformed] != 2 || s.Drops.Total() != 2 || s.ICMPErrors != 0 || s.PeerToPeer != 1 {
		t.Errorf("Stats = %+v, want 2 malformed, no other drop, no ICMP error, 1 peer to peer", s)
	}
}

// TestPortDeviceFragmentsRingFull: a packet whose fragments the LAN's TX
// ring takes only in part is lost, and counted once (tx_full); fragmented
// counts the packets whose every fragment went. It counted both.
func TestPortDeviceFragmentsRingFull(t *testing.T) {
	r := routerRig(t, nil)  // the memport LAN: MTU 1500, a ring of 2,048; nothing reads it
	const off, n = 16, 1100 // 2 fragments each: over the ring
	noDF := ipPacket(peerA, hostIP, bytes.Repeat([]byte{7}, 2000))
	binary.BigEndian.PutUint16(noDF[6:8], 0)
	header.IPv4(noDF).SetChecksum()
	for range n {
		if k, err := r.dev.Write([][]byte{append(make([]byte, off), noDF...)}, off); k != 1 || err != nil {
			t.Fatalf("Write = %d, %v", k, err)
		}
	}
	s := r.dev.Stats()
	full := s.Drops[PortDropTXFull]
	if full == 0 || s.Fragmented+full != n {
		t.Errorf("fragmented %d, tx_full %d: want some refused, the two adding up to the %d packets", s.Fragmented, full, n)
	}
}

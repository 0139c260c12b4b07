package tundev

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/wgpio/wgpio/header"
)

// bigPacket is ipPacket with n bytes of UDP payload, DF as asked (IPv4),
// and a valid header checksum.
func bigPacket(src, dst netip.Addr, n int, df bool, id uint16) []byte {
	pl := make([]byte, n)
	for i := range pl {
		pl[i] = byte(i*13 + int(id))
	}
	p := ipPacket(src, dst, pl)
	if src.Is4() {
		p[6] = 0
		if df {
			p[6] = 0x40
		}
		binary.BigEndian.PutUint16(p[4:6], id)
		header.IPv4(p).SetChecksum()
	}
	return p
}

// readAll reads until want packets came or a second passed.
func (r *portRig) readAll(t *testing.T, want, nbufs int) [][]byte {
	t.Helper()
	const off = 16
	bufs := make([][]byte, nbufs)
	for i := range bufs {
		bufs[i] = make([]byte, 2000)
	}
	sizes := make([]int, len(bufs))
	var got [][]byte
	for deadline := time.Now().Add(2 * time.Second); len(got) < want && time.Now().Before(deadline); {
		n, err := r.dev.Read(bufs, sizes, off)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			got = append(got, append([]byte(nil), bufs[i][off:off+sizes[i]]...))
		}
	}
	return got
}

// reassembleIPv4 puts fragments of one datagram together (in order, as
// Read returns them) and returns the datagram as it was before.
func reassembleIPv4(t *testing.T, frags [][]byte, mtu int) []byte {
	t.Helper()
	var data []byte
	for i, f := range frags {
		h := header.IPv4(f)
		if len(f) > mtu || !h.VerifyChecksum() || h.FragmentOffset() != len(data) || h.MoreFragments() != (i < len(frags)-1) {
			t.Fatalf("fragment %d: %d bytes, offset %d (want %d), MF %v, checksum ok %v", i, len(f), h.FragmentOffset(), len(data), h.MoreFragments(), h.VerifyChecksum())
		}
		data = append(data, h.Payload()...)
	}
	p := append(bytes.Clone(frags[0][:20]), data...)
	binary.BigEndian.PutUint16(p[2:4], uint16(len(p)))
	binary.BigEndian.PutUint16(p[6:8], 0)
	header.IPv4(p).SetChecksum()
	return p
}

// TestPortDeviceFragments: IPv4 packets over the tunnel MTU without DF come
// out of Read as fragments that reassemble to them, across Reads with few
// buffers, a burst of them included.
func TestPortDeviceFragments(t *testing.T) {
	r := newPortRig(t, 1, func(c *PortConfig) { c.MTU = 576 })
	const count = 50
	var sent [][]byte
	var frames [][]byte
	for i := range count {
		p := bigPacket(hostIP, farIP, 1400, false, uint16(i))
		sent = append(sent, p)
		frames = append(frames, ethFrame(macGW, macHost, 0x0800, p))
	}
	small := ipPacket(hostIP, farIP, []byte("small"))
	frames = append(frames, ethFrame(macGW, macHost, 0x0800, small))
	r.inject(t, 0, frames...)
	// 1,428 bytes at MTU 576: 3 fragments each (552 + 552 + 324 data).
	got := r.readAll(t, 3*count+1, 7)
	if len(got) != 3*count+1 {
		t.Fatalf("Read %d packets, want %d", len(got), 3*count+1)
	}
	byID := map[uint16][][]byte{}
	sawSmall := false
	for _, g := range got {
		if bytes.Equal(g, hop(small)) {
			sawSmall = true
			continue
		}
		id := header.IPv4(g).ID()
		byID[id] = append(byID[id], g)
	}
	if !sawSmall {
		t.Error("the small packet was lost")
	}
	for i, p := range sent {
		fr := byID[uint16(i)]
		if len(fr) != 3 {
			t.Fatalf("packet %d: %d fragments, want 3", i, len(fr))
		}
		if w := reassembleIPv4(t, fr, 576); !bytes.Equal(w, hop(p)) {
			t.Fatalf("packet %d reassembled differs", i)
		}
	}
	if s := r.dev.Stats(); s.Fragmented != count || s.Drops[PortDropFragment] != 0 || s.Drops[PortDropTooBig] != 0 {
		t.Errorf("Stats = %+v, want %d fragmented, no drops", s, count)
	}
}

// TestPortDeviceReadFragmentOrder: packets within the MTU that arrive in one
// burst behind a packet Read cuts into fragments come out after its
// fragments, in their order, as Linux forwards them: a datagram's
// fragment train from the LAN (a first fragment over the tunnel MTU, then
// a small last one) reaches the far end in order. Before, the small ones
// went ahead of the fragments.
func TestPortDeviceReadFragmentOrder(t *testing.T) {
	r := newPortRig(t, 1, func(c *PortConfig) { c.MTU = 576 })
	big := bigPacket(hostIP, farIP, 1400, false, 1)
	small1 := ipPacket(hostIP, farIP, []byte("after"))
	small2 := ipPacket(hostIP, farIP, []byte("after, too"))
	r.inject(t, 0, ethFrame(macGW, macHost, 0x0800, big), ethFrame(macGW, macHost, 0x0800, small1), ethFrame(macGW, macHost, 0x0800, small2))
	got := r.readAll(t, 5, 7)
	if len(got) != 5 {
		t.Fatalf("Read %d packets, want 3 fragments and 2 packets", len(got))
	}
	if w := reassembleIPv4(t, got[:3], 576); !bytes.Equal(w, hop(big)) {
		t.Errorf("the first three are not the big packet's fragments in order")
	}
	if !bytes.Equal(got[3], hop(small1)) || !bytes.Equal(got[4], hop(small2)) {
		t.Errorf("the small packets are not last, in order: %x, %x", got[3][:20], got[4][:20])
	}
	if s := r.dev.Stats(); s.Fragmented != 1 || s.Drops.Total() != 0 {
		t.Errorf("Stats = %+v, want 1 fragmented, no drops", s)
	}
}

// TestPortDeviceOverMTU: a packet over the tunnel MTU with DF (IPv4) or any
// IPv6 packet is dropped, counted over_mtu, and answered toward its sender
// with "fragmentation needed (mtu 1420)" / "packet too big (mtu 1420)" from
// the configured LAN address; never rate-limited.
func TestPortDeviceOverMTU(t *testing.T) {
	r := newPortRig(t, 1, func(c *PortConfig) { c.ICMPSource4, c.ICMPSource6 = lanIP, lanIP6 })
	p4 := bigPacket(hostIP, farIP, 1472, true, 7) // 1500 bytes, DF: ping -M do -s 1472
	p6 := bigPacket(hostIP6, netip.MustParseAddr("2001:2:0:12::5"), 1452, true, 0)
	const each = 20
	var frames [][]byte
	for range each {
		frames = append(frames, ethFrame(macGW, macHost, 0x0800, p4), ethFrame(macGW, macHost, 0x86dd, p6))
	}
	ok := ipPacket(hostIP, farIP, []byte("fits"))
	frames = append(frames, ethFrame(macGW, macHost, 0x0800, ok))
	r.inject(t, 0, frames...)
	if got := r.readAll(t, 1, 8); len(got) != 1 || !bytes.Equal(got[0], hop(ok)) {
		t.Fatalf("Read = %d packets, want only the one that fits", len(got))
	}
	replies := r.collect(2 * each)
	if len(replies) != 2*each {
		t.Fatalf("%d answers, want %d (one per packet, none suppressed)", len(replies), 2*each)
	}
	var n4, n6 int
	for _, f := range replies {
		if !bytes.Equal(f[0:6], macHost) || !bytes.Equal(f[6:12], macGW) {
			t.Fatalf("answer to %x from %x", f[0:6], f[6:12])
		}
		switch binary.BigEndian.Uint16(f[12:14]) {
		case 0x0800:
			ip := header.IPv4(f[14:])
			m, err := icmp.ParseMessage(1, ip.Payload())
			if err != nil || ip.Src() != lanIP || ip.Dst() != hostIP || m.Type != ipv4.ICMPTypeDestinationUnreachable || m.Code != 4 ||
				header.ICMPv4(ip.Payload()).NextHopMTU() != 1420 {
				t.Fatalf("IPv4 answer %v → %v: %+v, %v", ip.Src(), ip.Dst(), m, err)
			}
			n4++
		case 0x86dd:
			ip := header.IPv6(f[14:])
			m, err := icmp.ParseMessage(58, ip.Payload())
			if err != nil || ip.Src() != lanIP6 || m.Type != ipv6.ICMPTypePacketTooBig || m.Body.(*icmp.PacketTooBig).MTU != 1420 {
				t.Fatalf("IPv6 answer %v → %v: %+v, %v", ip.Src(), ip.Dst(), m, err)
			}
			n6++
		}
	}
	if n4 != each || n6 != each {
		t.Errorf("answers: %d IPv4, %d IPv6, want %d each", n4, n6, each)
	}
	if s := r.dev.Stats(); s.Drops[PortDropOverMTU] != 2*each || s.ICMPErrors != 2*each {
		t.Errorf("Stats: over_mtu %d, icmp_errors %d, want %d", s.Drops[PortDropOverMTU], s.ICMPErrors, 2*each)
	}
	if PortDropOverMTU.String() != "over_mtu" || PortDropFragment.String() != "cannot_fragment" {
		t.Errorf("names %q %q", PortDropOverMTU, PortDropFragment)
	}
}

// TestPortDeviceICMPSourcesFollow: SetICMPSources replaces the sources of
// the answers to oversized packets, as a gateway does when its LAN
// interface's addresses change: without a source of the family nothing is
// answered; with one, the answer comes from it. Before, the LAN addresses
// of start stayed the sources for ever.
func TestPortDeviceICMPSourcesFollow(t *testing.T) {
	r := newPortRig(t, 1, nil)
	p6 := bigPacket(hostIP6, netip.MustParseAddr("2001:2:0:12::5"), 1452, true, 0)
	ok := ipPacket(hostIP, farIP, []byte("fits")) // Read returns once it has this
	r.inject(t, 0, ethFrame(macGW, macHost, 0x86dd, p6), ethFrame(macGW, macHost, 0x0800, ok))
	r.readAll(t, 1, 8)
	if got := r.collect(1); len(got) != 0 {
		t.Fatalf("without an IPv6 source: %d answers, want none", len(got))
	}
	r.dev.SetICMPSources(lanIP, lanIP6)
	r.inject(t, 0, ethFrame(macGW, macHost, 0x86dd, p6), ethFrame(macGW, macHost, 0x0800, ok))
	r.readAll(t, 1, 8)
	got := r.collect(1)
	if len(got) != 1 {
		t.Fatalf("after SetICMPSources: %d answers, want 1", len(got))
	}
	if ip := header.IPv6(got[0][14:]); ip.Src() != lanIP6 || ip.Dst() != hostIP6 {
		t.Errorf("answer %v → %v, want %v → %v", ip.Src(), ip.Dst(), lanIP6, hostIP6)
	}
}

// TestPortDeviceICMPSubnets: with several LAN addresses (SetICMPSubnets),
// the answer to a host comes from our address of the host's subnet (IPv4)
// or with the longest prefix in common with it (IPv6), as a Linux router
// answers and as the fast path does; a host on none of them gets the
// configured source. It came from the first address of each family.
func TestPortDeviceICMPSubnets(t *testing.T) {
	second4, second6 := netip.MustParseAddr("198.18.13.1"), netip.MustParseAddr("2001:2:0:13::1")
	host4, host6 := netip.MustParseAddr("198.18.13.7"), netip.MustParseAddr("2001:2:0:13::7")
	r := newPortRig(t, 1, func(c *PortConfig) { c.ICMPSource4, c.ICMPSource6 = lanIP, lanIP6 })
	r.dev.SetICMPSubnets([]netip.Prefix{netip.PrefixFrom(lanIP, 24), netip.PrefixFrom(lanIP6, 64),
		netip.PrefixFrom(second4, 24), netip.PrefixFrom(second6, 64)})
	for _, c := range []struct{ host, want netip.Addr }{
		{hostIP, lanIP}, {host4, second4}, {hostIP6, lanIP6}, {host6, second6},
		{netip.MustParseAddr("198.18.99.9"), lanIP}, // on none: the configured source
	} {
		var p []byte
		et := uint16(0x0800)
		if c.host.Is4() {
			p = bigPacket(c.host, farIP, 1472, true, 7)
		} else {
			p = bigPacket(c.host, netip.MustParseAddr("2001:2:0:12::5"), 1452, true, 0)
			et = 0x86dd
		}
		ok := ipPacket(hostIP, farIP, []byte("fits")) // Read returns once it has this
		r.inject(t, 0, ethFrame(macGW, macHost, et, p), ethFrame(macGW, macHost, 0x0800, ok))
		r.readAll(t, 1, 8)
		got := r.collect(1)
		if len(got) != 1 {
			t.Fatalf("%v: %d answers, want 1", c.host, len(got))
		}
		var src netip.Addr
		if c.host.Is4() {
			src = header.IPv4(got[0][14:]).Src()
		} else {
			src = header.IPv6(got[0][14:]).Src()
		}
		if src != c.want {
			t.Errorf("answer to %v from %v, want %v", c.host, src, c.want)
		}
	}
}

// TestPortDeviceReadSmallBuffers: a packet cut into fragments for the
// tunnel whose fragment does not fit Read's buffer is lost and counted
// once (too_big; it counted fragmented too), and a buffer shorter than
// the offset is such a buffer, not a panic (it panicked).
func TestPortDeviceReadSmallBuffers(t *testing.T) {
	r := routerRig(t, nil)
	const off = 16
	big := eth4(bigPacket(hostIP, peerA, 1452, false, 9)) // 1480 bytes over the tunnel MTU 1420: 2 fragments
	r.inject(t, 0, big, eth4(ipPacket(hostIP, peerA, []byte("next"))))
	bufs, sizes := [][]byte{make([]byte, off+600), make([]byte, off+600)}, make([]int, 2)
	n, err := r.dev.Read(bufs, sizes, off)
	if err != nil || n != 1 || string(bufs[0][off+sizes[0]-4:off+sizes[0]]) != "next" {
		t.Fatalf("Read = %d, %v; want the next packet alone", n, err)
	}
	if s := r.dev.Stats(); s.Drops[PortDropTooBig] != 1 || s.Fragmented != 0 {
		t.Errorf("too_big %d, fragmented %d; want 1, 0", s.Drops[PortDropTooBig], s.Fragmented)
	}
	// Buffers of 8 bytes for an offset of 16: nothing fits; Read waits.
	r.inject(t, 0, big)
	done := make(chan error, 1)
	go func() {
		_, err := r.dev.Read([][]byte{make([]byte, 8)}, make([]int, 1), off)
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for r.dev.Stats().Drops[PortDropTooBig] != 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if s := r.dev.Stats(); s.Drops[PortDropTooBig] != 2 || s.Fragmented != 0 {
		t.Errorf("8-byte buffer: too_big %d, fragmented %d; want 2, 0", s.Drops[PortDropTooBig], s.Fragmented)
	}
	r.dev.Close()
	if err := <-done; err == nil {
		t.Errorf("Read after Close = nil, want an error")
	}
}

package fastpath

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// ttlFrame builds a UDP frame from hostA with the given TTL (hop limit), TOS
// (traffic class) and DF, payload size bytes.
func ttlFrame(t *testing.T, r *rig, src, dst netip.Addr, size int, ttl, tos uint8, df bool) dataplane.Frame {
	f := udpFrame(t, r.hostA.Queue(0).TX(), r.lanA.MAC(), r.hostA.MAC(), src, dst, 1000, 2000, seqPayload(7, size))
	p := f.Data()[header.EthernetLen:]
	if src.Is4() {
		p[1], p[8] = tos, ttl
		if !df {
			p[6] &^= 0x40
		}
		header.IPv4(p).SetChecksum()
	} else {
		binary.BigEndian.PutUint32(p[0:4], 6<<28|uint32(tos)<<20)
		p[7] = ttl
	}
	return f
}

// through sends frames from hostA through A (outbound) and B (inbound) and
// returns what reached hostB and what came back to hostA.
func through(t *testing.T, r *rig, frames ...dataplane.Frame) (atB, atA [][]byte) {
	t.Helper()
	sendAll(t, r.hostA, 0, frames)
	now := r.clock.Now()
	for range 4 { // bursts of 64
		r.a.workers[0].outbound(now)
	}
	for range 4 {
		r.b.workers[0].inbound(now)
	}
	for range 4 {
		r.a.workers[0].inbound(now) // anything B sent back into the tunnel
	}
	collect := func(p interface {
		Queue(int) dataplane.Queue
	}) [][]byte {
		var out [][]byte
		buf := make([]dataplane.Frame, 256)
		rx := p.Queue(0).RX()
		for {
			n := rx.Receive(buf)
			if n == 0 {
				return out
			}
			for i := range n {
				out = append(out, bytes.Clone(buf[i].Data()))
			}
			rx.Free(buf[:n])
		}
	}
	return collect(r.hostB), collect(r.hostA)
}

func TestTTLDecrementedOncePerGateway(t *testing.T) {
	r := newRig(t, rigConfig{})
	for _, c := range []struct{ src, dst netip.Addr }{{hostAddrA, hostAddrB}, {host6A, host6B}} {
		atB, _ := through(t, r, ttlFrame(t, r, c.src, c.dst, 100, 64, 0, true))
		if len(atB) != 1 {
			t.Fatalf("%v: %d frames at hostB, want 1 (drops A %v B %v)", c.dst, len(atB), r.a.Stats()[0].Drops.List(), r.b.Stats()[0].Drops.List())
		}
		p, _ := checkUDP(t, atB[0]) // Parse checks the IPv4 header checksum
		if p.TTL != 62 {
			t.Errorf("%v: TTL %d at hostB, want 62 (one less at each gateway)", c.dst, p.TTL)
		}
	}
}

// TestTTLExceeded: a packet that would leave a gateway with TTL 0 is
// dropped (ttl_exceeded) and answered with time exceeded: from the LAN
// address toward a LAN host, and from the gateway's tunnel address (here
// its LAN address: the rig has no tunnel address) back into the tunnel.
func TestTTLExceeded(t *testing.T) {
	r := newRig(t, rigConfig{})
	for _, c := range []struct {
		src, dst   netip.Addr
		ttl        uint8
		from       netip.Addr
		dropA      uint64
		icmpType   uint8
		wantAtHost int
	}{
		{hostAddrA, hostAddrB, 1, lanAddrA, 1, 11, 0},
		{host6A, host6B, 1, lan6A, 1, 3, 0},
		{hostAddrA, hostAddrB, 2, lanAddrB, 0, 11, 0}, // expires at B, answered into the tunnel
		{host6A, host6B, 2, lan6B, 0, 3, 0},
	} {
		before := TotalDrops(r.a.Stats())[DropTTLExceeded] + TotalDrops(r.b.Stats())[DropTTLExceeded]
		atB, atA := through(t, r, ttlFrame(t, r, c.src, c.dst, 100, c.ttl, 0, true))
		if len(atB) != 0 {
			t.Errorf("%v TTL %d: reached hostB", c.dst, c.ttl)
		}
		if len(atA) != 1 {
			t.Fatalf("%v TTL %d: %d answers at hostA, want 1 (A %v, B %v)", c.dst, c.ttl, len(atA), r.a.Stats()[0].Drops.List(), r.b.Stats()[0].Drops.List())
		}
		var p header.Packet
		if rr := header.Parse(atA[0], &p); rr != header.OK || p.Src != c.from || p.Dst != c.src || atA[0][p.L4Off] != c.icmpType {
			t.Errorf("%v TTL %d: answer %v from %v to %v type %d, want from %v type %d", c.dst, c.ttl, rr, p.Src, p.Dst, atA[0][p.L4Off], c.from, c.icmpType)
		}
		after := TotalDrops(r.a.Stats())[DropTTLExceeded] + TotalDrops(r.b.Stats())[DropTTLExceeded]
		if after != before+1 {
			t.Errorf("%v TTL %d: ttl_exceeded drops %d → %d, want one more", c.dst, c.ttl, before, after)
		}
	}
}

// TestSetLANAddrs: after SetLANAddrs (the LAN interface renumbered), the
// ICMP errors toward LAN hosts, and those into the tunnel where the
// gateway has no tunnel address (the rig has none), come from the new LAN
// addresses; before, they kept Config.LANAddr4 and LANAddr6 for the
// engine's life. Sending one (fragmentation needed toward the LAN, never
// rate-limited) allocates nothing.
func TestSetLANAddrs(t *testing.T) {
	r := newRig(t, rigConfig{})
	new4A, new6A := netip.MustParseAddr("198.19.1.7"), netip.MustParseAddr("2001:db8:1::7")
	new4B, new6B := netip.MustParseAddr("198.19.2.7"), netip.MustParseAddr("2001:db8:2::7")
	r.a.SetLANAddrs(new4A, new6A)
	r.b.SetLANAddrs(new4B, new6B)
	for _, c := range []struct {
		src, dst netip.Addr
		ttl      uint8
		from     netip.Addr
	}{
		{hostAddrA, hostAddrB, 1, new4A},
		{host6A, host6B, 1, new6A},
		{hostAddrA, hostAddrB, 2, new4B}, // expires at B, answered into the tunnel
		{host6A, host6B, 2, new6B},
	} {
		_, atA := through(t, r, ttlFrame(t, r, c.src, c.dst, 100, c.ttl, 0, true))
		if len(atA) != 1 {
			t.Fatalf("%v TTL %d: %d answers at hostA, want 1", c.dst, c.ttl, len(atA))
		}
		var p header.Packet
		if rr := header.Parse(atA[0], &p); rr != header.OK || p.Src != c.from {
			t.Errorf("%v TTL %d: answer %v from %v, want from %v", c.dst, c.ttl, rr, p.Src, c.from)
		}
	}
	f := ttlFrame(t, r, hostAddrA, hostAddrB, 1500-28, 64, 0, true) // over the tunnel MTU, DF
	tmpl := bytes.Clone(f.Data())
	r.hostA.Queue(0).TX().Free([]dataplane.Frame{f})
	frames := make([]dataplane.Frame, 16)
	tooBig := func() {
		tx := r.hostA.Queue(0).TX()
		n := tx.Alloc(frames)
		for i := range frames[:n] {
			frames[i].SetLen(len(tmpl))
			copy(frames[i].Data(), tmpl)
		}
		tx.Free(frames[tx.Transmit(frames[:n]):n])
		r.a.workers[0].outbound(r.clock.Now())
		rx := r.hostA.Queue(0).RX()
		m := rx.Receive(frames)
		if m != n {
			t.Fatalf("%d answers at hostA, want %d", m, n)
		}
		var p header.Packet
		if rr := header.Parse(frames[0].Data(), &p); rr != header.OK || p.Src != new4A {
			t.Fatalf("fragmentation needed %v from %v, want from %v", rr, p.Src, new4A)
		}
		rx.Free(frames[:m])
	}
	tooBig()
	if allocs := testing.AllocsPerRun(100, tooBig); allocs != 0 {
		t.Errorf("AllocsPerRun(16 answered with fragmentation needed) = %v, want 0", allocs)
	}
}

// reassemble4 puts IPv4 fragments (IP packets, any order) back together.
func reassemble4(t *testing.T, frags [][]byte) []byte {
	t.Helper()
	var total int
	data := make([]byte, 65536)
	var first []byte
	for _, f := range frags {
		h := header.IPv4(f)
		if !h.VerifyChecksum() {
			t.Fatalf("fragment header checksum")
		}
		off := h.FragmentOffset()
		copy(data[off:], h.Payload())
		if !h.MoreFragments() {
			total = off + len(h.Payload())
		}
		if off == 0 {
			first = f
		}
	}
	if first == nil || total == 0 {
		t.Fatalf("no first or last fragment among %d", len(frags))
	}
	hl := header.IPv4(first).HeaderLen()
	p := append(bytes.Clone(first[:hl]), data[:total]...)
	binary.BigEndian.PutUint16(p[2:4], uint16(len(p)))
	binary.BigEndian.PutUint16(p[6:8], 0)
	header.IPv4(p).SetChecksum()
	return p
}

// TestFragmentIntoTunnel: IPv4 packets without DF over the tunnel MTU are
// cut into fragments that each cross the tunnel (one transport message
// each, counted against the nonce reservation) and reassemble at hostB into
// the original with TTL − 2.
func TestFragmentIntoTunnel(t *testing.T) {
	for _, c := range []struct {
		mtu, size, frags int
	}{
		{1420, 1500 - 28, 2},
		{576, 1500 - 28, 3},
	} {
		r := newRig(t, rigConfig{mtu: c.mtu})
		const count = 40
		var frames [][]byte
		var in []dataplane.Frame
		for i := range count {
			f := ttlFrame(t, r, hostAddrA, hostAddrB, c.size, 64, 0, false)
			binary.BigEndian.PutUint16(f.Data()[header.EthernetLen+4:], uint16(i)) // IP ID
			header.IPv4(f.Data()[header.EthernetLen:]).SetChecksum()
			frames = append(frames, bytes.Clone(f.Data()[header.EthernetLen:]))
			in = append(in, f)
		}
		atB, _ := through(t, r, in...)
		if len(atB) != count*c.frags {
			t.Fatalf("mtu %d: %d frames at hostB, want %d (A %v, B %v)", c.mtu, len(atB), count*c.frags, r.a.Stats()[0].Drops.List(), r.b.Stats()[0].Drops.List())
		}
		byID := map[uint16][][]byte{}
		for _, d := range atB {
			p := d[header.EthernetLen:]
			if len(p) > c.mtu {
				t.Fatalf("fragment of %d bytes, mtu %d", len(p), c.mtu)
			}
			id := header.IPv4(p).ID()
			byID[id] = append(byID[id], p)
		}
		for i, orig := range frames {
			want := bytes.Clone(orig)
			want[8] -= 2
			header.IPv4(want).SetChecksum()
			if got := reassemble4(t, byID[uint16(i)]); !bytes.Equal(got, want) {
				t.Fatalf("mtu %d: packet %d reassembles to\n%x\nwant\n%x", c.mtu, i, got[:40], want[:40])
			}
		}
		s := r.a.Stats()[0]
		if s.Fragmented != count || s.Fragments != uint64(count*c.frags) || s.Encrypted != uint64(count*c.frags) {
			t.Errorf("mtu %d: fragmented %d, fragments %d, encrypted %d; want %d, %d, %d", c.mtu, s.Fragmented, s.Fragments, s.Encrypted, count, count*c.frags, count*c.frags)
		}
	}
}

// TestICMPRateLimits: a flood of TTL-1 packets gets time exceeded at the
// configured rates, the rest counted as suppressed; a flood of DF packets
// over the MTU is answered in full (path MTU discovery is never limited).
func TestICMPRateLimits(t *testing.T) {
	r := newRig(t, rigConfig{icmpRate: 100, icmpBurst: 10, icmpDest: -1})
	var in []dataplane.Frame
	for range 60 {
		in = append(in, ttlFrame(t, r, hostAddrA, hostAddrB, 64, 1, 0, true))
	}
	_, atA := through(t, r, in...)
	s := r.a.Stats()[0]
	if len(atA) != 10 || s.ICMPSuppressed != 50 || s.Drops[DropTTLExceeded] != 60 {
		t.Errorf("TTL-1 flood at once: %d answers, %d suppressed, %d dropped; want the burst 10, 50, 60", len(atA), s.ICMPSuppressed, s.Drops[DropTTLExceeded])
	}
	r.clock.Advance(100 * time.Millisecond) // 100/s: 10 more
	in = in[:0]
	for range 60 {
		in = append(in, ttlFrame(t, r, hostAddrA, hostAddrB, 64, 1, 0, true))
	}
	if _, atA = through(t, r, in...); len(atA) != 10 {
		t.Errorf("after 100 ms at 100/s: %d answers, want 10", len(atA))
	}
	in = in[:0]
	for range 60 {
		in = append(in, ttlFrame(t, r, hostAddrA, hostAddrB, 1472, 64, 0, true))
	}
	if _, atA = through(t, r, in...); len(atA) != 60 {
		t.Errorf("DF flood over the MTU: %d answers, want all 60", len(atA))
	}
	// Per destination: 6 at once, then one a second.
	r2 := newRig(t, rigConfig{icmpRate: -1})
	in = in[:0]
	for range 30 {
		in = append(in, ttlFrame(t, r2, hostAddrA, hostAddrB, 64, 1, 0, true))
	}
	if _, atA = through(t, r2, in...); len(atA) != 6 || r2.a.Stats()[0].ICMPSuppressed != 24 {
		t.Errorf("per destination: %d answers, %d suppressed, want 6, 24", len(atA), r2.a.Stats()[0].ICMPSuppressed)
	}
}

// TestECN: the outer header carries the inner ECN field as the kernel's
// WireGuard sets it (CE as ECT(0)); a CE mark on the outer header reaches
// the inner packet (RFC 6040).
func TestECN(t *testing.T) {
	r := newRig(t, rigConfig{})
	for _, c := range []struct {
		src, dst netip.Addr
		inner    uint8
		outer    uint8
	}{
		{hostAddrA, hostAddrB, header.ECNECT0, header.ECNECT0},
		{hostAddrA, hostAddrB, header.ECNECT1, header.ECNECT1},
		{hostAddrA, hostAddrB, header.ECNCE, header.ECNECT0},
		{hostAddrA, hostAddrB, header.ECNNotECT, header.ECNNotECT},
		{host6A, host6B, header.ECNECT0, header.ECNECT0},
	} {
		sendAll(t, r.hostA, 0, []dataplane.Frame{ttlFrame(t, r, c.src, c.dst, 64, 64, 0xb8|c.inner, true)})
		r.a.workers[0].outbound(r.clock.Now())
		var outer []byte
		recvAll(t, r.wanB, 1, time.Second, func(q int, d []byte) { outer = bytes.Clone(d) })
		if outer == nil {
			t.Fatal("nothing on the WAN")
		}
		ip := outer[header.EthernetLen:]
		if got := header.ECN(ip); got != c.outer || ip[1]&^3 != 0 {
			t.Errorf("inner ECN %d: outer TOS %#x, want ECN %d, DSCP 0", c.inner, ip[1], c.outer)
		}
		if !header.IPv4(ip).VerifyChecksum() {
			t.Errorf("outer IPv4 checksum")
		}
		// A router on the way marks the outer header CE.
		ip[1] |= header.ECNCE
		header.IPv4(ip).SetChecksum()
		f := udpFrame(t, r.wanA.Queue(0).TX(), r.wanB.MAC(), r.wanA.MAC(), wanAddrA, wanAddrB, portA, portB, []byte{0})
		f.SetLen(len(outer))
		copy(f.Data(), outer)
		sendAll(t, r.wanA, 0, []dataplane.Frame{f})
		r.b.workers[0].inbound(r.clock.Now())
		var inner []byte
		recvAll(t, r.hostB, 1, time.Second, func(q int, d []byte) { inner = bytes.Clone(d) })
		if inner == nil {
			t.Fatalf("inner ECN %d: nothing at hostB (B %v)", c.inner, r.b.Stats()[0].Drops.List())
		}
		want := c.inner
		if want != header.ECNNotECT {
			want = header.ECNCE
		}
		p := inner[header.EthernetLen:]
		if got := header.ECN(p); got != want || (p[0]>>4 == 4 && (!header.IPv4(p).VerifyChecksum() || p[1]&^3 != 0xb8)) {
			t.Errorf("inner ECN %d, outer CE: inner TOS %#x at hostB, want ECN %d", c.inner, p[1], want)
		}
	}
}

// TestMSSClamp: MSSClampAuto lowers the MSS of SYNs crossing the gateway
// to the tunnel MTU − 40.
func TestMSSClamp(t *testing.T) {
	r := newRig(t, rigConfig{mssClamp: MSSClampAuto})
	f := ttlFrame(t, r, hostAddrA, hostAddrB, 24, 64, 0, true)
	p := f.Data()[header.EthernetLen:]
	p[9] = header.ProtoTCP
	header.IPv4(p).SetChecksum()
	tcp := p[20:]
	clear(tcp)
	tcp[12], tcp[13] = 6<<4, 0x02 // 24-byte header, SYN
	copy(tcp[20:], []byte{2, 4, 0x05, 0xb4})
	binary.BigEndian.PutUint16(tcp[16:], ^header.FoldChecksum(header.Checksum(tcp, header.PseudoHeaderChecksum(header.ProtoTCP, hostAddrA, hostAddrB, len(tcp)))))
	atB, _ := through(t, r, f)
	if len(atB) != 1 {
		t.Fatalf("%d frames at hostB", len(atB))
	}
	q := atB[0][header.EthernetLen+20:]
	if mss := binary.BigEndian.Uint16(q[22:24]); mss != 1380 {
		t.Errorf("MSS at hostB %d, want 1380", mss)
	}
	if header.FoldChecksum(header.Checksum(q, header.PseudoHeaderChecksum(header.ProtoTCP, hostAddrA, hostAddrB, len(q)))) != 0xffff {
		t.Errorf("TCP checksum does not verify after the clamp")
	}
}

// TestFragmentToLAN: a decrypted packet larger than the LAN MTU (here 1280
// at gateway B, behind a 1420 tunnel) is fragmented toward the LAN when DF is
// clear; with DF, or over IPv6, it is dropped (lan_too_big) and its sender
// gets "fragmentation needed" / "packet too big" with the LAN MTU back
// through the tunnel.
func TestFragmentToLAN(t *testing.T) {
	r := newRig(t, rigConfig{lanMTUB: 1280})
	orig := ttlFrame(t, r, hostAddrA, hostAddrB, 1400-28, 64, 0, false)
	want := bytes.Clone(orig.Data()[header.EthernetLen:])
	want[8] -= 2
	header.IPv4(want).SetChecksum()
	atB, _ := through(t, r, orig)
	if len(atB) != 2 {
		t.Fatalf("%d frames at hostB, want 2 fragments (B %v)", len(atB), r.b.Stats()[0].Drops.List())
	}
	var frags [][]byte
	for _, d := range atB {
		if len(d)-header.EthernetLen > 1280 {
			t.Errorf("fragment of %d bytes over the LAN MTU", len(d)-header.EthernetLen)
		}
		frags = append(frags, d[header.EthernetLen:])
	}
	if got := reassemble4(t, frags); !bytes.Equal(got, want) {
		t.Errorf("reassembled\n%x\nwant\n%x", got[:40], want[:40])
	}
	for _, c := range []struct {
		src, dst netip.Addr
		typ      uint8
	}{{hostAddrA, hostAddrB, 3}, {host6A, host6B, 2}} {
		atB, atA := through(t, r, ttlFrame(t, r, c.src, c.dst, 1400-48, 64, 0, true))
		if len(atB) != 0 || len(atA) != 1 {
			t.Fatalf("%v with DF over the LAN MTU: %d at hostB, %d answers at hostA", c.dst, len(atB), len(atA))
		}
		var p header.Packet
		header.Parse(atA[0], &p)
		mtu := int(binary.BigEndian.Uint16(atA[0][p.L4Off+6:]))
		if c.typ == 2 {
			mtu = int(binary.BigEndian.Uint32(atA[0][p.L4Off+4:]))
		}
		if atA[0][p.L4Off] != c.typ || mtu != 1280 {
			t.Errorf("%v: answer type %d mtu %d, want %d, 1280", c.dst, atA[0][p.L4Off], mtu, c.typ)
		}
	}
	if d := r.b.Stats()[0].Drops[DropLANTooBig]; d != 2 {
		t.Errorf("lan_too_big = %d, want 2", d)
	}
}

// TestSetLANMTU: a LAN MTU lowered while the engine runs (SetLANMTU, as
// the gateway calls it when `ip link set DEV mtu N` changes its LAN
// interface) applies to the next decrypted packet: one with DF over the
// new MTU is dropped (lan_too_big) and answered with "fragmentation
// needed" carrying it, one without DF is fragmented to it; raised again,
// the same packet passes whole. Before SetLANMTU existed the MTU read at
// New held for the engine's life, and such packets left whole, for the
// kernel to drop without a counter.
func TestSetLANMTU(t *testing.T) {
	r := newRig(t, rigConfig{})
	const size = 1400 - 28 // ICMP payload: a 1400-byte IPv4 packet
	if atB, _ := through(t, r, ttlFrame(t, r, hostAddrA, hostAddrB, size, 64, 0, true)); len(atB) != 1 {
		t.Fatalf("at the LAN MTU of 1500: %d frames at hostB, want 1", len(atB))
	}
	r.b.SetLANMTU(1280)
	atB, atA := through(t, r, ttlFrame(t, r, hostAddrA, hostAddrB, size, 64, 0, true))
	if len(atB) != 0 || len(atA) != 1 {
		t.Fatalf("DF over the new LAN MTU: %d frames at hostB, %d answers at hostA, want 0 and 1", len(atB), len(atA))
	}
	var p header.Packet
	header.Parse(atA[0], &p)
	if typ, mtu := atA[0][p.L4Off], binary.BigEndian.Uint16(atA[0][p.L4Off+6:]); typ != 3 || mtu != 1280 {
		t.Errorf("answer type %d mtu %d, want 3 (fragmentation needed) and 1280", typ, mtu)
	}
	if d := r.b.Stats()[0].Drops[DropLANTooBig]; d != 1 {
		t.Errorf("lan_too_big = %d, want 1", d)
	}
	atB, _ = through(t, r, ttlFrame(t, r, hostAddrA, hostAddrB, size, 64, 0, false))
	if len(atB) != 2 {
		t.Fatalf("no DF over the new LAN MTU: %d frames at hostB, want 2 fragments", len(atB))
	}
	for _, d := range atB {
		if len(d)-header.EthernetLen > 1280 {
			t.Errorf("fragment of %d bytes over the LAN MTU of 1280", len(d)-header.EthernetLen)
		}
	}
	r.b.SetLANMTU(1500)
	if atB, _ := through(t, r, ttlFrame(t, r, hostAddrA, hostAddrB, size, 64, 0, true)); len(atB) != 1 || len(atB[0])-header.EthernetLen != 1400 {
		t.Errorf("LAN MTU back at 1500: %d frames at hostB, want the 1400-byte packet whole", len(atB))
	}
}

// TestZeroAllocsFragmenting: a burst that is fragmented on the way into
// the tunnel allocates nothing either.
func TestZeroAllocsFragmenting(t *testing.T) {
	r := newRig(t, rigConfig{})
	f := ttlFrame(t, r, hostAddrA, hostAddrB, 1500-28, 64, 0, false)
	tmpl := bytes.Clone(f.Data())
	r.hostA.Queue(0).TX().Free([]dataplane.Frame{f})
	frames := make([]dataplane.Frame, 64)
	if got := pump(t, r, frames, tmpl, 16); got != 32 {
		t.Fatalf("warm-up: %d fragments at hostB, want 32 (A %v, B %v)", got, r.a.Stats()[0].Drops.List(), r.b.Stats()[0].Drops.List())
	}
	allocs := testing.AllocsPerRun(100, func() {
		if got := pump(t, r, frames, tmpl, 16); got != 32 {
			t.Fatalf("%d fragments at hostB, want 32", got)
		}
	})
	if allocs != 0 {
		t.Errorf("AllocsPerRun(16 packets cut into 32 fragments, sealed, opened) = %v, want 0", allocs)
	}
}

// TestHostAddrNotTransit: a packet from the tunnel to one of the host's
// own LAN addresses (Config.HostAddrs) reaches Config.Exception, for the
// host to answer, as Linux delivers locally what wg0 receives for any of
// its addresses, and is not sent onto the LAN. Before, only the tunnel
// addresses were the gateway's own: a ping from a remote site to the
// gateway's LAN address was forwarded to the LAN, where the kernel could
// not resolve its own address (no_neighbour), and never answered.
func TestHostAddrNotTransit(t *testing.T) {
	var got [][]byte
	r := newRig(t, rigConfig{hostAddrsB: []netip.Addr{lanAddrB, lan6B}, exception: func(p []byte) { got = append(got, bytes.Clone(p)) }})
	for _, c := range []struct{ src, dst netip.Addr }{{hostAddrA, lanAddrB}, {host6A, lan6B}, {hostAddrA, hostAddrB}} {
		got = nil
		f := ttlFrame(t, r, c.src, c.dst, 100, 64, 0, true)
		want := bytes.Clone(f.Data()[header.EthernetLen:])
		header.Forward(want) // A's hop; B's is not taken: not transit
		atB, _ := through(t, r, f)
		if c.dst == hostAddrB { // transit, as before
			if len(got) != 0 || len(atB) != 1 {
				t.Errorf("%v: %d packets to the exception, %d at hostB, want 0 and 1", c.dst, len(got), len(atB))
			}
			continue
		}
		if len(got) != 1 || !bytes.Equal(got[0], want) || len(atB) != 0 {
			t.Errorf("%v: exception got %x, want %x; %d frames at hostB, want 0 (B %v)", c.dst, got, want, len(atB), r.b.Stats()[0].Drops.List())
		}
	}
}

// TestSetHostAddrs: the host's addresses can be replaced while running
// (the WAN's after DHCP): a packet to an address added goes to the
// exception, one to an address taken away is transit again; an IPv6
// link-local address is never the host's here (RFC 4007 §9: Linux
// delivers to it only from its own link).
func TestSetHostAddrs(t *testing.T) {
	var got [][]byte
	r := newRig(t, rigConfig{hostAddrsB: []netip.Addr{lanAddrB}, exception: func(p []byte) { got = append(got, bytes.Clone(p)) }})
	toException := func(dst netip.Addr) bool {
		t.Helper()
		got = nil
		f := ttlFrame(t, r, hostAddrA, dst, 100, 64, 0, true)
		atB, _ := through(t, r, f)
		if len(got)+len(atB) != 1 {
			t.Fatalf("%v: %d to the exception, %d at hostB, want 1 in all", dst, len(got), len(atB))
		}
		return len(got) == 1
	}
	if !toException(lanAddrB) || toException(hostAddrB) {
		t.Fatalf("before SetHostAddrs: want %v the host's and %v transit", lanAddrB, hostAddrB)
	}
	r.b.SetHostAddrs([]netip.Addr{hostAddrB, netip.MustParseAddr("fe80::1")})
	if toException(lanAddrB) || !toException(hostAddrB) {
		t.Errorf("after SetHostAddrs(%v): want %v transit and %v the host's", hostAddrB, lanAddrB, hostAddrB)
	}
	if _, ok := r.b.routes.Load().own[netip.MustParseAddr("fe80::1")]; ok {
		t.Errorf("link-local fe80::1 taken as the host's")
	}
}

// TestOwnNotTransit: a packet from the tunnel to one of the gateway's own
// tunnel addresses is not transit: it reaches Config.Exception with the TTL
// / hop limit and checksum it came out of the tunnel with (one less than
// hostA sent: A forwarded it), even at 1, and with the outer header's CE
// mark applied (RFC 6040 decapsulation is not a router's hop).
func TestOwnNotTransit(t *testing.T) {
	own4, own6 := netip.MustParseAddr("198.19.2.254"), netip.MustParseAddr("2001:db8:2::fe")
	var got [][]byte
	r := newRig(t, rigConfig{tunnelAddrs: []netip.Addr{own4, own6}, exception: func(p []byte) { got = append(got, bytes.Clone(p)) }})
	for _, c := range []struct {
		src, dst netip.Addr
		ttl, tos uint8
		ce       bool // mark the outer header CE on the way
	}{
		{hostAddrA, own4, 64, 0, false},
		{hostAddrA, own4, 2, 0, false}, // leaves A with 1: B must not answer time exceeded
		{hostAddrA, own4, 64, header.ECNECT0, true},
		{host6A, own6, 64, 0, false},
		{host6A, own6, 2, header.ECNECT0, true},
	} {
		f := ttlFrame(t, r, c.src, c.dst, 100, c.ttl, c.tos, true)
		want := bytes.Clone(f.Data()[header.EthernetLen:])
		header.Forward(want) // A's hop
		if c.ce {
			header.DecapECN(want, header.ECNCE)
		}
		sendAll(t, r.hostA, 0, []dataplane.Frame{f})
		r.a.workers[0].outbound(r.clock.Now())
		var outer []byte
		recvAll(t, r.wanB, 1, time.Second, func(q int, d []byte) { outer = bytes.Clone(d) })
		if outer == nil {
			t.Fatalf("%v TTL %d: nothing on the WAN (A %v)", c.dst, c.ttl, r.a.Stats()[0].Drops.List())
		}
		if c.ce {
			ip := outer[header.EthernetLen:]
			ip[1] |= header.ECNCE
			header.IPv4(ip).SetChecksum()
		}
		in := udpFrame(t, r.wanA.Queue(0).TX(), r.wanB.MAC(), r.wanA.MAC(), wanAddrA, wanAddrB, portA, portB, []byte{0})
		in.SetLen(len(outer))
		copy(in.Data(), outer)
		sendAll(t, r.wanA, 0, []dataplane.Frame{in})
		got = nil
		r.b.workers[0].inbound(r.clock.Now())
		if len(got) != 1 || !bytes.Equal(got[0], want) {
			t.Fatalf("%v TTL %d: exception got %x, want %x (B %v)", c.dst, c.ttl, got, want, r.b.Stats()[0].Drops.List())
		}
		if d := TotalDrops(r.b.Stats())[DropTTLExceeded]; d != 0 {
			t.Fatalf("%v TTL %d: B counted %d ttl_exceeded", c.dst, c.ttl, d)
		}
	}
}

// TestLANSourcePerSubnet: of several LAN addresses (SetLANSubnets), an
// ICMP error toward a LAN host comes from the one of the host's subnet
// (IPv4; Linux: the preferred source of the connected route back), or
// with the longest prefix in common (IPv6, up to its own prefix length:
// RFC 6724 §5 rule 8), else from LANAddrs' (the interface's first); a
// link-local host still gets the link-local source. Every error came
// from the first address of the family: a host on a second subnet, or a
// second /64, saw a traceroute hop of another subnet.
func TestLANSourcePerSubnet(t *testing.T) {
	pf, ad := netip.MustParsePrefix, netip.MustParseAddr
	s := &icmpSources{lan4: ad("198.19.1.1"), lan6: ad("2001:db8:1::1"), lanLL6: ad("fe80::1"),
		lanNets: []netip.Prefix{pf("198.19.1.1/24"), pf("198.19.7.1/24"), pf("2001:db8:1:7::1/64"), pf("2001:db8:1::1/64"), pf("fd00:1::1/48")}}
	pkt4 := func(src string) []byte {
		p := make([]byte, 20)
		p[0] = 0x45
		a := ad(src).As4()
		copy(p[12:16], a[:])
		return p
	}
	pkt6 := func(src string) []byte {
		p := make([]byte, 40)
		p[0] = 0x60
		a := ad(src).As16()
		copy(p[8:24], a[:])
		return p
	}
	for _, tc := range []struct {
		p    []byte
		want string
	}{
		{pkt4("198.19.7.10"), "198.19.7.1"},
		{pkt4("198.19.1.10"), "198.19.1.1"},
		{pkt4("198.18.250.1"), "198.19.1.1"}, // on none: the first
		{pkt6("2001:db8:1::10"), "2001:db8:1::1"},
		{pkt6("2001:db8:1:7::10"), "2001:db8:1:7::1"},
		{pkt6("fd00:1:0:5::9"), "fd00:1::1"},
		{pkt6("2001:db8:1:8::10"), "2001:db8:1:7::1"}, // 2001:db8:1:8:: shares 60 bits with :7::, 48 with ::
		{pkt6("fe80::99"), "fe80::1"},
	} {
		if got := s.lanFrom(tc.p); got != ad(tc.want) {
			t.Errorf("lanFrom(a packet from %v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	// Without subnets, LANAddrs' for every host (as before).
	s.lanNets = nil
	if got := s.lanFrom(pkt4("198.19.7.10")); got != ad("198.19.1.1") {
		t.Errorf("lanFrom without subnets = %v, want the first", got)
	}
}

// TestFragmentOrderIntoTunnel: the fragments of a packet cut on the way
// into the tunnel leave right behind its first, before the burst's later
// packets, as Linux sends a packet's fragments before it forwards the
// next. Before, they went at the burst's end: a UDP flow's small datagram
// behind a large one without DF reached the far host whole before the
// large one's last fragment, and the application got them reordered (seen
// in namespaces: of 50 pairs sent back to back, the small ones first).
func TestFragmentOrderIntoTunnel(t *testing.T) {
	r := newRig(t, rigConfig{mtu: 576})
	var in []dataplane.Frame
	var want []string
	for i := range 24 {
		size := 40 // whole
		switch i % 4 {
		case 0:
			size = 1500 - 28 // 3 fragments at 576
		case 1:
			size = 700 // 2
		}
		f := ttlFrame(t, r, hostAddrA, hostAddrB, size, 64, 0, false)
		binary.BigEndian.PutUint16(f.Data()[header.EthernetLen+4:], uint16(i)) // IP ID
		header.IPv4(f.Data()[header.EthernetLen:]).SetChecksum()
		in = append(in, f)
		for off := 0; off < size+header.UDPLen; off += 552 {
			want = append(want, fmt.Sprintf("%d@%d", i, off))
		}
	}
	atB, _ := through(t, r, in...)
	var got []string
	for _, d := range atB {
		h := header.IPv4(d[header.EthernetLen:])
		got = append(got, fmt.Sprintf("%d@%d", h.ID(), h.FragmentOffset()))
	}
	if !slices.Equal(got, want) {
		t.Errorf("at hostB (IP ID@fragment offset):\n%v\nwant\n%v", got, want)
	}
}

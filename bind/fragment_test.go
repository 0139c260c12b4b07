package bind

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
)

// reassemble4 puts the IPv4 fragments frags (IP packets, in order) of one
// datagram back together as a receiver does (RFC 791 §3.2), checking each
// on the way: a valid header checksum, one identification, DF clear, MF
// on all but the last, offsets that follow each other, a multiple of 8
// data bytes in all but the last. It returns the datagram and its
// identification.
func reassemble4(frags [][]byte) ([]byte, uint16, error) {
	var data []byte
	id := binary.BigEndian.Uint16(frags[0][4:6])
	for i, f := range frags {
		hl := int(f[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(f[2:4]))
		ff := binary.BigEndian.Uint16(f[6:8])
		last := i == len(frags)-1
		switch {
		case f[0]>>4 != 4 || hl != 20 || total != len(f):
			return nil, 0, fmt.Errorf("fragment %d: version/IHL %#x, total length %d of %d bytes", i, f[0], total, len(f))
		case sum1071(f[:hl]) != 0:
			return nil, 0, fmt.Errorf("fragment %d: bad header checksum", i)
		case binary.BigEndian.Uint16(f[4:6]) != id:
			return nil, 0, fmt.Errorf("fragment %d: identification %#x, want %#x", i, binary.BigEndian.Uint16(f[4:6]), id)
		case ff&0x4000 != 0:
			return nil, 0, fmt.Errorf("fragment %d: DF set", i)
		case (ff&0x2000 != 0) == last:
			return nil, 0, fmt.Errorf("fragment %d of %d: MF %v", i, len(frags), ff&0x2000 != 0)
		case int(ff&0x1fff)*8 != len(data):
			return nil, 0, fmt.Errorf("fragment %d: offset %d, want %d", i, int(ff&0x1fff)*8, len(data))
		case !last && (total-hl)%8 != 0:
			return nil, 0, fmt.Errorf("fragment %d: %d data bytes, not a multiple of 8", i, total-hl)
		}
		data = append(data, f[hl:]...)
	}
	h := append([]byte(nil), frags[0][:20]...)
	binary.BigEndian.PutUint16(h[2:4], uint16(20+len(data)))
	binary.BigEndian.PutUint16(h[6:8], 0)
	binary.BigEndian.PutUint16(h[10:12], 0)
	binary.BigEndian.PutUint16(h[10:12], sum1071(h))
	return append(h, data...), id, nil
}

// reassemble6 puts the IPv6 fragments frags (IP packets, in order) of one
// datagram back together as a receiver does (RFC 8200 §4.5), checking
// each: Next Header 44, a payload length that matches, a Fragment header
// with one Next Header and identification, reserved bits zero, M on all
// but the last, offsets that follow each other, a multiple of 8 bytes in
// all but the last. It returns the datagram and the identification.
func reassemble6(frags [][]byte) ([]byte, uint32, error) {
	var data []byte
	next, id := frags[0][40], binary.BigEndian.Uint32(frags[0][44:48])
	for i, f := range frags {
		om := binary.BigEndian.Uint16(f[42:44])
		last := i == len(frags)-1
		switch {
		case f[0]>>4 != 6 || f[6] != 44 || int(binary.BigEndian.Uint16(f[4:6])) != len(f)-40:
			return nil, 0, fmt.Errorf("fragment %d: version %d, next header %d, payload length %d of %d bytes", i, f[0]>>4, f[6], binary.BigEndian.Uint16(f[4:6]), len(f))
		case f[40] != next || f[41] != 0 || om&6 != 0:
			return nil, 0, fmt.Errorf("fragment %d: fragment header %x", i, f[40:48])
		case binary.BigEndian.Uint32(f[44:48]) != id:
			return nil, 0, fmt.Errorf("fragment %d: identification %#x, want %#x", i, binary.BigEndian.Uint32(f[44:48]), id)
		case (om&1 != 0) == last:
			return nil, 0, fmt.Errorf("fragment %d of %d: M %v", i, len(frags), om&1 != 0)
		case int(om&^7) != len(data):
			return nil, 0, fmt.Errorf("fragment %d: offset %d, want %d", i, om&^7, len(data))
		case !last && (len(f)-48)%8 != 0:
			return nil, 0, fmt.Errorf("fragment %d: %d data bytes, not a multiple of 8", i, len(f)-48)
		}
		data = append(data, f[48:]...)
	}
	h := append([]byte(nil), frags[0][:40]...)
	h[6] = next
	binary.BigEndian.PutUint16(h[4:6], uint16(len(data)))
	return append(h, data...), id, nil
}

// wantFrame is the frame the Bind sends for payload to dst, built by
// hand (udpFrame, B→A swapped), with IPv4's DF clear and identification
// id.
func wantFrame(dst netip.AddrPort, payload []byte, cksum bool, id uint16) []byte {
	src := ourIP4
	if dst.Addr().Is6() {
		src = ourIP6
	}
	want := udpFrame(netip.AddrPortFrom(src, ourPort), dst, payload, cksum)
	copy(want[0:6], macB)
	copy(want[6:12], macA)
	if src.Is4() {
		ip := want[14:34]
		ip[6] = 0
		binary.BigEndian.PutUint16(ip[4:6], id)
		binary.BigEndian.PutUint16(ip[10:12], 0)
		binary.BigEndian.PutUint16(ip[10:12], sum1071(ip))
	}
	return want
}

// ipID returns the identification of an IPv4 frame.
func ipID(frame []byte) uint16 { return binary.BigEndian.Uint16(frame[18:20]) }

// fragPayload is a payload whose outer IP datagram is size bytes long,
// every byte telling its place (and tag the datagram).
func fragPayload(v4 bool, size int, tag byte) []byte {
	n := size - 48
	if v4 {
		n = size - 28
	}
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7) ^ tag
	}
	return p
}

// checkFragments checks that frames, Ethernet frames from the Bind, are
// the fragments of the datagram of payload to dst, each within mtu, with
// the port's Ethernet header, in order; that they reassemble to exactly
// that datagram (IPv4: of identification id4); and returns its IPv6
// identification (0 for IPv4).
func checkFragments(t *testing.T, frames [][]byte, mtu int, dst netip.AddrPort, payload []byte, cksum bool, id4 uint16) uint32 {
	t.Helper()
	v4 := dst.Addr().Is4()
	want := wantFrame(dst, payload, cksum, id4)
	ips := make([][]byte, len(frames))
	for i, f := range frames {
		if len(f)-14 > mtu {
			t.Errorf("fragment %d: %d bytes of IP, more than the MTU %d", i, len(f)-14, mtu)
		}
		if !bytes.Equal(f[:14], want[:14]) {
			t.Errorf("fragment %d: Ethernet header %x, want %x", i, f[:14], want[:14])
		}
		ips[i] = f[14:]
	}
	var got []byte
	var id6 uint32
	var err error
	if v4 {
		var id uint16
		got, id, err = reassemble4(ips)
		if err == nil && id != id4 {
			err = fmt.Errorf("identification %#x, want %#x", id, id4)
		}
	} else {
		got, id6, err = reassemble6(ips)
	}
	if err != nil {
		t.Fatalf("%d fragments: %v", len(frames), err)
	}
	if !bytes.Equal(got, want[14:]) {
		t.Fatalf("the %d fragments reassemble to\n%x\nwant\n%x", len(frames), got, want[14:])
	}
	return id6
}

// fragCount is the number of fragments a datagram of size bytes with
// headers of hdr bytes (IPv4's 20, IPv6's 40 and its Fragment header's 8)
// takes at mtu: all but the last full, with a multiple of 8 data bytes.
func fragCount(size, hdr, mtu int) int {
	per := (mtu - hdr) &^ 7
	data := size - 20
	if hdr == 48 {
		data = size - 40
	}
	return (data + per - 1) / per
}

// TestSendFragments: a 1,500-byte datagram through a port of a smaller
// MTU (IPv4: 576 and 1,000; IPv6: 1,280) leaves as fragments each within
// the MTU that reassemble to exactly the datagram, between a small
// datagram before it and one after it in the same batch, and is counted
// as transmitted and fragmented (Fragments: its frames), none as too_big.
// Before, it was dropped as too_big, as no Linux router drops it (the
// kernel fragments WireGuard's outer packets).
func TestSendFragments(t *testing.T) {
	for _, tc := range []struct {
		mtu   int
		dst   netip.AddrPort
		cksum bool
	}{
		{576, netip.AddrPortFrom(peerIP4, 1234), false},
		{576, netip.AddrPortFrom(peerIP4, 1234), true},
		{1000, netip.AddrPortFrom(peerIP4, 1234), false},
		{1280, netip.AddrPortFrom(peerIP6, 4321), false},
	} {
		v4 := tc.dst.Addr().Is4()
		t.Run(fmt.Sprintf("%v mtu %d checksum %v", tc.dst.Addr(), tc.mtu, tc.cksum), func(t *testing.T) {
			r := newRigPorts(t, memport.Config{MTU: tc.mtu, RingSize: 4096}, func(c *Config) { c.ChecksumIPv4 = tc.cksum })
			ep, err := r.bind.ParseEndpoint(tc.dst.String())
			if err != nil {
				t.Fatal(err)
			}
			hdr := 48
			if v4 {
				hdr = 20
			}
			n := fragCount(1500, hdr, tc.mtu)
			big, before, after := fragPayload(v4, 1500, 0), []byte("the datagram before"), []byte("the one after")
			var ids []uint32
			for round := range 2 {
				if err := r.bind.Send([][]byte{before, big, after}, ep); err != nil {
					t.Fatalf("Send = %v, want nil", err)
				}
				got := r.collect(t, n+2, 5*time.Second)
				if len(got) != n+2 {
					t.Fatalf("peer received %d frames, want %d: the one before, %d fragments, the one after", len(got), n+2, n)
				}
				var id uint16
				if v4 {
					id = ipID(got[0])
				}
				if w := wantFrame(tc.dst, before, tc.cksum, id); !bytes.Equal(got[0], w) {
					t.Errorf("frame 0 =\n%x\nwant the datagram before\n%x", got[0], w)
				}
				ids = append(ids, checkFragments(t, got[1:n+1], tc.mtu, tc.dst, big, tc.cksum, id+1))
				if w := wantFrame(tc.dst, after, tc.cksum, id+2); !bytes.Equal(got[n+1], w) {
					t.Errorf("frame %d =\n%x\nwant the datagram after\n%x", n+1, got[n+1], w)
				}
				s := r.bind.Stats()
				if w := uint64(round + 1); s.TXPackets != 3*w || s.Fragmented != w || s.Fragments != uint64(n)*w || s.Drops.Total() != 0 {
					t.Errorf("round %d: tx %d, fragmented %d, fragments %d, drops %v; want %d, %d, %d, none",
						round, s.TXPackets, s.Fragmented, s.Fragments, s.Drops.List(), 3*w, w, uint64(n)*w)
				}
			}
			// IPv6: the queue's identification, one more a fragmented
			// datagram (RFC 8200 §4.5).
			if !v4 && ids[1] != ids[0]+1 {
				t.Errorf("IPv6 identifications %#x then %#x, want one more", ids[0], ids[1])
			}
			if st := r.a.Queue(0).Stats(); st.Drops.Total() != 0 {
				t.Errorf("the port dropped frames: %v (too long for its MTU?)", st.Losses())
			}
		})
	}
}

// TestSendFragmentsFlush: a batch of BatchSize datagrams that each take
// two fragments (more frames than a TX queue's out holds) arrives whole
// and in order: fragments of one datagram together, datagram after
// datagram.
func TestSendFragmentsFlush(t *testing.T) {
	const mtu = 1000
	r := newRigPorts(t, memport.Config{MTU: mtu, RingSize: 4096}, nil)
	dst := netip.AddrPortFrom(peerIP4, 1234)
	ep, _ := r.bind.ParseEndpoint(dst.String())
	bufs := make([][]byte, BatchSize)
	for i := range bufs {
		bufs[i] = fragPayload(true, 1500, byte(i))
	}
	if err := r.bind.Send(bufs, ep); err != nil {
		t.Fatalf("Send = %v, want nil", err)
	}
	got := r.collect(t, 2*BatchSize, 5*time.Second)
	if len(got) != 2*BatchSize {
		t.Fatalf("peer received %d frames, want %d", len(got), 2*BatchSize)
	}
	id := ipID(got[0])
	for i := range bufs {
		checkFragments(t, got[2*i:2*i+2], mtu, dst, bufs[i], false, id+uint16(i))
	}
	if s := r.bind.Stats(); s.TXPackets != BatchSize || s.Fragmented != BatchSize || s.Fragments != 2*BatchSize || s.Drops.Total() != 0 {
		t.Errorf("tx %d, fragmented %d, fragments %d, drops %v; want %d, %d, %d, none", s.TXPackets, s.Fragmented, s.Fragments, s.Drops.List(), BatchSize, BatchSize, 2*BatchSize)
	}
}

// TestSendFragmentsThenWhole: a batch whose first datagrams each take two
// fragments and whose rest go whole, more frames in all than a TX
// queue's out holds, arrives whole and in order. Before, a datagram sent
// whole was put behind the others without a look at out's room, and the
// batch (maxFragments + 1 fragmented, then whole ones) ran past its end:
// the compat gateway panicked (index out of range) when stock
// wireguard-go sent such a batch after the WAN MTU dropped below the
// tunnel's (the soak of 5 December, IPv6 outer).
func TestSendFragmentsThenWhole(t *testing.T) {
	const mtu = 1000
	r := newRigPorts(t, memport.Config{MTU: mtu, RingSize: 4096}, nil)
	dst := netip.AddrPortFrom(peerIP6, 1234)
	ep, _ := r.bind.ParseEndpoint(dst.String())
	frag := maxFragments + 1
	if frag >= BatchSize {
		t.Skipf("BatchSize %d: no room for %d fragmented datagrams and a whole one", BatchSize, frag)
	}
	bufs := make([][]byte, BatchSize)
	for i := range bufs {
		if i < frag {
			bufs[i] = fragPayload(false, 1500, byte(i))
		} else {
			bufs[i] = []byte(fmt.Sprintf("whole datagram %d", i))
		}
	}
	if err := r.bind.Send(bufs, ep); err != nil {
		t.Fatalf("Send = %v, want nil", err)
	}
	want := 2*frag + BatchSize - frag
	got := r.collect(t, want, 5*time.Second)
	if len(got) != want {
		t.Fatalf("peer received %d frames, want %d", len(got), want)
	}
	for i := range frag {
		checkFragments(t, got[2*i:2*i+2], mtu, dst, bufs[i], false, 0)
	}
	for i := frag; i < BatchSize; i++ {
		if w := wantFrame(dst, bufs[i], false, 0); !bytes.Equal(got[frag+i], w) {
			t.Fatalf("frame %d =\n%x\nwant datagram %d\n%x", frag+i, got[frag+i], i, w)
		}
	}
	if s := r.bind.Stats(); s.TXPackets != BatchSize || s.Fragmented != uint64(frag) || s.Fragments != 2*uint64(frag) || s.Drops.Total() != 0 {
		t.Errorf("tx %d, fragmented %d, fragments %d, drops %v; want %d, %d, %d, none", s.TXPackets, s.Fragmented, s.Fragments, s.Drops.List(), BatchSize, frag, 2*frag)
	}
}

// TestSendFragmentsNoAllocs: a batch with a fragmented datagram allocates
// nothing.
func TestSendFragmentsNoAllocs(t *testing.T) {
	for _, tc := range []struct {
		mtu int
		dst netip.AddrPort
	}{
		{576, netip.AddrPortFrom(peerIP4, 7)},
		{1280, netip.AddrPortFrom(peerIP6, 7)},
	} {
		r := newRigPorts(t, memport.Config{MTU: tc.mtu, RingSize: 4096}, nil)
		ep, _ := r.bind.ParseEndpoint(tc.dst.String())
		bufs := [][]byte{make([]byte, 64), fragPayload(tc.dst.Addr().Is4(), 1500, 0), make([]byte, 64)}
		fs := make([]dataplane.Frame, 16)
		rxB := r.b.Queue(0).RX()
		step := func() {
			if err := r.bind.Send(bufs, ep); err != nil {
				t.Fatal(err)
			}
			n := rxB.Receive(fs)
			rxB.Free(fs[:n])
		}
		step()
		if a := testing.AllocsPerRun(200, step); a != 0 {
			t.Errorf("%v: allocs per Send with a fragmented datagram = %v, want 0", tc.dst.Addr(), a)
		}
		if s := r.bind.Stats(); s.Fragmented != 202 || s.Drops.Total() != 0 {
			t.Errorf("%v: fragmented %d, drops %v; want 202, none", tc.dst.Addr(), s.Fragmented, s.Drops.List())
		}
	}
}

// TestSendFragmentsNoBuffer: with frames for the batch's datagrams but
// none for the fragments, the datagram over the MTU is dropped and
// counted as no_buffer (Send: ErrNoBuffer), and the others go, in order;
// with frames again it goes as fragments.
func TestSendFragmentsNoBuffer(t *testing.T) {
	const mtu = 1000
	r := newRigPorts(t, memport.Config{MTU: mtu, RingSize: 4096}, nil)
	dst := netip.AddrPortFrom(peerIP4, 1234)
	ep, _ := r.bind.ParseEndpoint(dst.String())
	// Take every free frame of the queue's pool but three.
	giveBack := takeTXFramesBut(r.bind.txqs[0], 3)
	big := fragPayload(true, 1500, 0)
	err := r.bind.Send([][]byte{[]byte("before"), big, []byte("after")}, ep)
	if !errors.Is(err, ErrNoBuffer) {
		t.Errorf("Send with no frame for the fragments = %v, want ErrNoBuffer", err)
	}
	got := r.collect(t, 2, 5*time.Second)
	if len(got) != 2 || !bytes.Equal(got[0], wantFrame(dst, []byte("before"), false, ipID(got[0]))) ||
		!bytes.Equal(got[1], wantFrame(dst, []byte("after"), false, ipID(got[0])+2)) {
		t.Fatalf("peer received %d frames %x, want the datagrams before and after", len(got), got)
	}
	if s := r.bind.Stats(); s.TXPackets != 2 || s.Drops[DropNoBuffer] != 1 || s.Drops.Total() != 1 || s.Fragmented != 0 || s.Fragments != 0 {
		t.Errorf("tx %d, drops %v, fragmented %d, fragments %d; want 2, no_buffer=1, 0, 0", s.TXPackets, s.Drops.List(), s.Fragmented, s.Fragments)
	}
	giveBack()
	if err := r.bind.Send([][]byte{big}, ep); err != nil {
		t.Fatalf("Send with frames again = %v", err)
	}
	got = r.collect(t, 2, 5*time.Second)
	if len(got) != 2 {
		t.Fatalf("peer received %d frames, want 2 fragments", len(got))
	}
	checkFragments(t, got, mtu, dst, big, false, ipID(got[0]))
}

// TestSendFragmentsTooBig: what cannot be sent at all stays too_big: a
// datagram that would take more than maxFragments fragments (IPv4 at MTU
// 68: 48 data bytes a fragment) and one longer than a frame holds; a
// datagram that fits the MTU goes.
func TestSendFragmentsTooBig(t *testing.T) {
	r := newRigPorts(t, memport.Config{MTU: 68, RingSize: 4096}, nil)
	dst := netip.AddrPortFrom(peerIP4, 1234)
	ep, _ := r.bind.ParseEndpoint(dst.String())
	many := make([]byte, maxFragments*48) // with the UDP header, one fragment more
	if err := r.bind.Send([][]byte{many, make([]byte, dataplane.DefaultFrameSize), []byte("fits")}, ep); err != nil {
		t.Fatalf("Send = %v, want nil (the drops counted)", err)
	}
	got := r.collect(t, 1, 5*time.Second)
	if len(got) != 1 || !bytes.Equal(got[0], wantFrame(dst, []byte("fits"), false, ipID(got[0]))) {
		t.Fatalf("peer received %d frames %x, want the one that fits", len(got), got)
	}
	if s := r.bind.Stats(); s.TXPackets != 1 || s.Drops[DropTooBig] != 2 || s.Drops.Total() != 2 || s.Fragmented != 0 {
		t.Errorf("tx %d, drops %v, fragmented %d; want 1, too_big=2, 0", s.TXPackets, s.Drops.List(), s.Fragmented)
	}
	// One fragment fewer goes.
	if err := r.bind.Send([][]byte{many[:len(many)-8]}, ep); err != nil {
		t.Fatal(err)
	}
	got = r.collect(t, maxFragments, 5*time.Second)
	if len(got) != maxFragments {
		t.Fatalf("peer received %d frames, want %d fragments", len(got), maxFragments)
	}
	checkFragments(t, got, 68, dst, many[:len(many)-8], false, ipID(got[0]))
}

// TestSendFragmentsTXFull: when the TX ring takes only part of a
// datagram's fragments, the datagram counts as tx_full (not transmitted,
// not fragmented) and the fragments that went count as fragments.
func TestSendFragmentsTXFull(t *testing.T) {
	r := newRigPorts(t, memport.Config{MTU: 576, RingSize: 4}, nil)
	ep, _ := r.bind.ParseEndpoint(netip.AddrPortFrom(peerIP4, 1234).String())
	// Two whole, then three fragments: the ring of 4 takes four frames.
	if err := r.bind.Send([][]byte{{1}, {2}, fragPayload(true, 1500, 0)}, ep); err != nil {
		t.Fatalf("Send = %v, want nil (tx_full is counted)", err)
	}
	if got := r.collect(t, 4, 5*time.Second); len(got) != 4 {
		t.Fatalf("peer received %d frames, want 4", len(got))
	}
	if s := r.bind.Stats(); s.TXPackets != 2 || s.Drops[DropTXFull] != 1 || s.Drops.Total() != 1 || s.Fragmented != 0 || s.Fragments != 2 {
		t.Errorf("tx %d, drops %v, fragmented %d, fragments %d; want 2, tx_full=1, 0, 2", s.TXPackets, s.Drops.List(), s.Fragmented, s.Fragments)
	}
}

// BenchmarkSend sends batches of 64 datagrams of 64 bytes (whole) or 1,500
// (fragmented: IPv4 at MTU 1,000, two fragments each) over memport, the
// peer's side drained by the same goroutine, so that the cost is the
// Bind's send path: the fitting datagrams' must stay as it was before
// fragmentation.
func BenchmarkSend(b *testing.B) {
	for _, bc := range []struct {
		name      string
		size, mtu int
	}{{"whole", 64, 1500}, {"fragmented", 1472, 1000}} {
		b.Run(bc.name, func(b *testing.B) {
			r := newRigPorts(b, memport.Config{MTU: bc.mtu, RingSize: 4096}, nil)
			ep, _ := r.bind.ParseEndpoint("198.18.9.2:7")
			bufs := make([][]byte, 64)
			for i := range bufs {
				bufs[i] = make([]byte, bc.size)
			}
			fs := make([]dataplane.Frame, 256)
			rxB := r.b.Queue(0).RX()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := r.bind.Send(bufs, ep); err != nil {
					b.Fatal(err)
				}
				for n := rxB.Receive(fs); n > 0; n = rxB.Receive(fs) {
					rxB.Free(fs[:n])
				}
			}
		})
	}
}

package fastpath

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/dataplanetest"
	"github.com/wgpio/wgpio/header"
)

// sendFull sends n full-size inner packets (1,420 bytes, IPv4) from hostA
// and has A's worker 0 run outbound on them; packet i carries
// seqPayload(i).
func sendFull(t *testing.T, r *rig, n int) {
	t.Helper()
	tx := r.hostA.Queue(0).TX()
	frames := make([]dataplane.Frame, n)
	for i := range frames {
		frames[i] = udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1000, 2000, seqPayload(uint32(i), udpPayloadFor(1420)))
	}
	sendAll(t, r.hostA, 0, frames)
	r.a.workers[0].outbound(r.clock.Now())
}

// TestOuterFragmentedExtremeMTUs: at WAN MTUs from IPv4's least (68) up,
// IPv6's least (1280) and one under it, a full-size outer packet leaves as
// fragments of the expected number that reassemble; a packet that would
// need more than maxFragments (IPv4 at 28 to 35, IPv6 at 56 to 63: 183
// fragments of 8 bytes) or an MTU no fragment fits leaves whole (for the
// WAN port to count as too long), as it does with no limit (0 or
// negative) or a limit over the frame size. Before, a packet of more than
// maxFragments fragments panicked the worker (fwd.frags sliced past its
// length before the count was checked).
func TestOuterFragmentedExtremeMTUs(t *testing.T) {
	for _, tc := range []struct {
		wan6  bool
		mtu   int
		frags int // per full-size packet; 1: whole
	}{
		{false, 68, 31}, {false, 69, 31}, {false, 576, 3}, {false, 1479, 2}, {false, 1480, 1},
		{false, 67, 37}, {false, 36, 92}, {false, 35, 1}, {false, 28, 1}, {false, 27, 1}, {false, 1, 1},
		{true, 1279, 2}, {true, 1280, 2}, {true, 1499, 2}, {true, 1500, 1},
		{true, 68, 92}, {true, 64, 92}, {true, 63, 1}, {true, 56, 1}, {true, 55, 1},
		{false, 0, 1}, {false, -1, 1}, {true, 0, 1}, {true, -1 << 40, 1}, {true, 1 << 20, 1}, {false, 9000, 1},
	} {
		t.Run(fmt.Sprintf("ipv6=%v/mtu=%d", tc.wan6, tc.mtu), func(t *testing.T) {
			r := newRig(t, rigConfig{wan6: tc.wan6})
			r.a.SetWANMTU(tc.mtu)
			const n = 4
			sendFull(t, r, n)
			wire := wireFrames(t, r.wanB, 0)
			check := tc.mtu
			if tc.frags == 1 {
				check = 1 << 16
			}
			got := reassembleOuter(t, wire, check)
			if len(got) != n {
				t.Fatalf("%d datagrams from %d frames, want %d", len(got), len(wire), n)
			}
			for i, dg := range got {
				if dg.frags != tc.frags {
					t.Fatalf("datagram %d in %d frames, want %d", i, dg.frags, tc.frags)
				}
			}
			d := deliverAtB(t, r, got)
			for i := range n {
				if i >= len(d) || !bytes.Equal(d[i], seqPayload(uint32(i), udpPayloadFor(1420))) {
					t.Fatalf("B delivered %d of %d, packet %d not as sent", len(d), n, i)
				}
			}
			s := r.a.Stats()[0]
			wantFragd := uint64(0)
			if tc.frags > 1 {
				wantFragd = n
			}
			if s.OuterFragmented != wantFragd || s.Drops.Total() != 0 {
				t.Errorf("outer_fragmented %d, drops %v; want %d, none", s.OuterFragmented, s.Drops.List(), wantFragd)
			}
		})
	}
}

// TestOuterFragmentedBigBursts: bursts of 64 full-size packets whose
// fragments are more than a WAN batch (wanBatchLen) leave in order and
// reassemble, burst after burst, with the MTU changed between bursts.
func TestOuterFragmentedBigBursts(t *testing.T) {
	r := newRig(t, rigConfig{})
	for round, mtu := range []int{300, 1400, 250, 576, 0, 300} {
		r.a.SetWANMTU(mtu)
		sendFull(t, r, 64)
		check := mtu
		if mtu <= 0 {
			check = 1 << 16
		}
		got := reassembleOuter(t, wireFrames(t, r.wanB, 0), check)
		if len(got) != 64 {
			t.Fatalf("round %d (MTU %d): %d datagrams, want 64; drops %v", round, mtu, len(got), TotalDrops(r.a.Stats()).List())
		}
		d := deliverAtB(t, r, got)
		for i := range 64 {
			if i >= len(d) || !bytes.Equal(d[i], seqPayload(uint32(i), udpPayloadFor(1420))) {
				t.Fatalf("round %d (MTU %d): B delivered %d of 64, packet %d not as sent", round, mtu, len(d), i)
			}
		}
	}
	if d := TotalDrops(r.a.Stats()); d.Total() != 0 {
		t.Errorf("drops %v", d.List())
	}
}

// TestOuterFragmentedNoBufferMidBurst: when the pool runs dry in the middle
// of a burst, the packets whose fragments got frames leave whole and in
// order (a dropped packet's frame serving the fragments of a later one),
// the rest are counted fragment_no_buffer; at IPv4's least MTU a
// burst of 64 cuts into more frames than the WAN ring holds (ring_full,
// counted per frame). Every frame is accounted for after.
func TestOuterFragmentedNoBufferMidBurst(t *testing.T) {
	t.Run("pool dry", func(t *testing.T) {
		r := newRig(t, rigConfig{})
		r.a.SetWANMTU(576) // 3 fragments: 2 frames more each
		tx := r.hostA.Queue(0).TX()
		frames := make([]dataplane.Frame, 8)
		for i := range frames {
			frames[i] = udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1000, 2000, seqPayload(uint32(i), udpPayloadFor(1420)))
		}
		sendAll(t, r.hostA, 0, frames)
		wanTX := r.wanA.Queue(0).TX()
		held := takeAll(wanTX)
		// Five frames: two packets' fragments, and one short of the third.
		wanTX.Free(held[:5])
		held = held[5:]
		r.a.workers[0].outbound(r.clock.Now())
		got := reassembleOuter(t, wireFrames(t, r.wanB, 0), 576)
		wanTX.Free(held)
		// A dropped packet's frame feeds the next packet's fragments:
		// packets 0, 1, 3 and 6 leave.
		d := deliverAtB(t, r, got)
		last := -1
		for _, p := range d {
			seq := int(binary.BigEndian.Uint32(p))
			if seq <= last || seq >= len(frames) || !bytes.Equal(p, seqPayload(uint32(seq), udpPayloadFor(1420))) {
				t.Fatalf("delivered packet %d after %d, or not as sent", seq, last)
			}
			last = seq
		}
		dr := TotalDrops(r.a.Stats())
		if len(got) < 2 || len(d) != len(got) || uint64(len(d))+dr[DropFragmentNoBuffer] != uint64(len(frames)) || dr.Total() != dr[DropFragmentNoBuffer] {
			t.Errorf("%d datagrams left, %d delivered, drops %v; want at least 2, all delivered, the rest fragment_no_buffer", len(got), len(d), dr.List())
		}
		r.a.Close()
		r.b.Close()
		dataplanetest.CheckAccounting(t, r.hostA, r.lanA, r.wanA, r.wanB, r.lanB, r.hostB)
	})
	t.Run("ring full", func(t *testing.T) {
		r := newRig(t, rigConfig{})
		r.a.SetWANMTU(68) // 31 fragments each: 1,984 frames for 64 packets
		sendFull(t, r, 64)
		wire := drainPort(r.wanB)
		s := r.a.Stats()[0]
		if s.OuterFragments != 64*31 || uint64(len(wire))+s.Drops[DropRingFull] != 64*31 {
			t.Errorf("%d fragments made, %d left, %d ring_full; want %d made, all left or counted", s.OuterFragments, len(wire), s.Drops[DropRingFull], 64*31)
		}
		r.a.Close()
		r.b.Close()
		dataplanetest.CheckAccounting(t, r.hostA, r.lanA, r.wanA, r.wanB, r.lanB, r.hostB)
	})
}

// TestOuterFragmentedNoHeadroom: an outer IPv6 packet over the WAN MTU in
// a frame without the 8 bytes of headroom its fragment 0 needs is dropped
// and counted (fragment_no_buffer), its fragments' frames freed, and
// nothing written in front of the frame.
func TestOuterFragmentedNoHeadroom(t *testing.T) {
	r := newRig(t, rigConfig{wan6: true})
	sendFull(t, r, 1) // whole at the default MTU: a real outer frame
	wire := drainPort(r.wanB)
	if len(wire) != 1 {
		t.Fatalf("%d frames, want 1", len(wire))
	}
	r.a.SetWANMTU(1280)
	w := r.a.workers[0]
	for _, room := range []int{0, 7} {
		var fr [1]dataplane.Frame
		if w.wanTX.Alloc(fr[:]) != 1 {
			t.Fatal("Alloc: pool empty")
		}
		f := &fr[0]
		f.Reset(room)
		f.SetLen(len(wire[0]))
		copy(f.Data(), wire[0])
		// A canary in front of the data, in the chunk.
		chunk := f.Pool().Mem()[f.Chunk() : f.Chunk()+uint64(room)]
		for i := range chunk {
			chunk[i] = 0xa5
		}
		before := TotalDrops(r.a.Stats())[DropFragmentNoBuffer]
		w.toWAN(fr[:], false)
		if !fr[0].IsZero() {
			t.Errorf("headroom %d: toWAN left the frame in the slice", room)
		}
		if n := len(drainPort(r.wanB)); n != 0 {
			t.Errorf("headroom %d: %d frames left", room, n)
		}
		if d := TotalDrops(r.a.Stats())[DropFragmentNoBuffer] - before; d != 1 {
			t.Errorf("headroom %d: fragment_no_buffer +%d, want +1", room, d)
		}
		for i, c := range chunk {
			if c != 0xa5 {
				t.Fatalf("headroom %d: byte %d in front of the data overwritten", room, i)
			}
		}
	}
	r.a.Close()
	r.b.Close()
	dataplanetest.CheckAccounting(t, r.hostA, r.lanA, r.wanA, r.wanB, r.lanB, r.hostB)
}

// TestSetWANMTUConcurrent: the WAN MTU changed from another goroutine
// while a worker sends (run with -race): every burst leaves as whole
// packets and fragments that reassemble, each within one of the MTUs set,
// and B delivers every packet as sent.
func TestSetWANMTUConcurrent(t *testing.T) {
	r := newRig(t, rigConfig{wan6: true})
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			r.a.SetWANMTU([]int{1280, 1500, 0, 1400, 1300}[i%5])
		}
	}()
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	for round := range 50 {
		sendFull(t, r, 16)
		got := reassembleOuter(t, wireFrames(t, r.wanB, 0), 1500)
		if len(got) != 16 {
			t.Fatalf("round %d: %d datagrams, want 16", round, len(got))
		}
		d := deliverAtB(t, r, got)
		for i := range 16 {
			if i >= len(d) || !bytes.Equal(d[i], seqPayload(uint32(i), udpPayloadFor(1420))) {
				t.Fatalf("round %d: B delivered %d of 16, packet %d not as sent", round, len(d), i)
			}
		}
	}
	if d := TotalDrops(r.a.Stats()); d.Total() != 0 {
		t.Errorf("drops %v", d.List())
	}
}

// TestOuterIPv4IDsOneSequence: the outer IPv4 packets a worker sends,
// whole or as fragments, take their identifications from the worker's one
// sequence (RFC 6864 §4.1: unique per source, destination and protocol
// while a datagram may live, since DF is clear and a router may fragment
// the whole ones too; Linux's IPv4 takes them from one counter per
// destination). Before, fragmented packets took theirs from a second
// sequence from another random start, which the first crossed: a whole
// packet and a fragmented one toward a peer could share an
// identification at once, and its reassembly mix them up.
func TestOuterIPv4IDsOneSequence(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.a.SetWANMTU(576)
	sizes := []int{100, 1392, 1392, 100, 100, 1392, 100}
	sendSizes(t, r, sizes)
	r.a.workers[0].outbound(r.clock.Now())
	var ids []uint16
	for _, d := range drainPort(r.wanB) {
		h := header.IPv4(d[header.EthernetLen:])
		if h.FragmentOffset() == 0 {
			ids = append(ids, h.ID())
		}
	}
	if len(ids) != len(sizes) {
		t.Fatalf("%d datagrams, want %d", len(ids), len(sizes))
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] != ids[i-1]+1 {
			t.Fatalf("identifications %#x (packet sizes %v): want each 1 past the last", ids, sizes)
		}
	}
}

// TestOuterFragmentedZeroAllocs: fragmenting outer packets allocates
// nothing (the fragments' frames come from the pool, the scratch is the
// worker's), for a few packets cut in two, when a burst's fragments take
// more than one WAN batch (64 packets in 6 fragments each), at IPv6 at a
// WAN MTU of 68 (92 fragments a packet) or with the WAN on a VLAN.
func TestOuterFragmentedZeroAllocs(t *testing.T) {
	for _, tc := range []struct {
		name       string
		wan6       bool
		vlan       uint16
		mtu, burst int
	}{
		{"ipv4-1280x4", false, 0, 1280, 4},
		{"ipv6-1280x4", true, 0, 1280, 4},
		{"ipv4-300x64", false, 0, 300, 64},
		{"ipv6-68x4", true, 0, 68, 4},
		{"ipv4-vlan-576x32", false, 7, 576, 32},
		{"ipv6-vlan-1280x32", true, 7, 1280, 32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigConfig{wan6: tc.wan6, wanVLAN: tc.vlan})
			r.a.SetWANMTU(tc.mtu)
			tmpl := templateFrame(t, r, udpPayloadFor(1420))
			frames := make([]dataplane.Frame, 64)
			tx := r.hostA.Queue(0).TX()
			rx := r.wanB.Queue(0).RX()
			round := func() {
				k := tx.Alloc(frames[:tc.burst])
				for i := range k {
					frames[i].SetLen(len(tmpl))
					copy(frames[i].Data(), tmpl)
				}
				tx.Transmit(frames[:k])
				r.a.workers[0].outbound(r.clock.Now())
				for {
					n := rx.Receive(frames)
					if n == 0 {
						break
					}
					rx.Free(frames[:n])
				}
			}
			round()
			if a := testing.AllocsPerRun(50, round); a != 0 { // 51 rounds (one to warm up)
				t.Errorf("%v allocations per burst", a)
			}
			s := r.a.Stats()[0]
			if want := uint64(52 * tc.burst); s.OuterFragmented != want || s.Drops.Total() != 0 {
				t.Errorf("outer_fragmented %d, drops %v; want %d, none", s.OuterFragmented, s.Drops.List(), want)
			}
		})
	}
}

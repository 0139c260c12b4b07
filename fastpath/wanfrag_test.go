package fastpath

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/header"
)

// outerDatagram is one UDP datagram gateway A sent, put back together from
// its fragments by reassembleOuter.
type outerDatagram struct {
	src, dst netip.AddrPort
	msg      []byte // the UDP payload: a WireGuard message
	frags    int    // frames it came in (1: whole)
}

// reassembleOuter reads the frames A sent (Ethernet, untagged) in order and
// puts IP fragments back together (RFC 791 §3.2, RFC 8200 §4.5), checking
// what a receiver's kernel would: every frame within mtu bytes of IP
// packet, fragments of one datagram consecutive, in order, their offsets
// adjoining, all but the last a multiple of 8 bytes with MF / M set, one
// identification, IPv4 DF clear.
// sendFragmented sends UDP payloads of sizes from host A through A's
// outbound path, takes the frames it puts on the WAN (len(sizes) + 2 ×
// (frags-1): the payloads over 1,000 bytes cut into frags fragments each,
// within mtu), reassembles them as B's kernel would and hands each
// datagram to B (ReceiveWAN), then checks that host B got every payload,
// in order. It returns the datagrams, for the caller's further checks.
func sendFragmented(t *testing.T, r *rig, sizes []int, frags, mtu int) []outerDatagram {
	t.Helper()
	sendSizes(t, r, sizes)
	r.a.workers[0].outbound(r.clock.Now())
	var wire [][]byte
	recvAll(t, r.wanB, len(sizes)+2*(frags-1), 100*time.Millisecond, func(_ int, d []byte) {
		wire = append(wire, bytes.Clone(d))
	})
	got := reassembleOuter(t, wire, mtu)
	if len(got) != len(sizes) {
		t.Fatalf("%d datagrams from %d frames, want %d", len(got), len(wire), len(sizes))
	}
	for i, dg := range got {
		if want := map[bool]int{false: 1, true: frags}[sizes[i] > 1000]; dg.frags != want {
			t.Errorf("datagram %d (%d bytes inner): %d frames, want %d", i, sizes[i], dg.frags, want)
		}
		// B's kernel reassembled it: B takes it through ReceiveWAN.
		if !r.b.ReceiveWAN(0, dg.src, dg.dst, dg.msg) {
			t.Fatal("ReceiveWAN: mailbox full")
		}
	}
	r.b.workers[0].drainMailbox(r.clock.Now())
	k := 0
	recvAll(t, r.hostB, len(sizes), 100*time.Millisecond, func(_ int, d []byte) {
		_, pl := checkUDP(t, d)
		if k < len(sizes) && !bytes.Equal(pl, seqPayload(uint32(k), sizes[k])) {
			t.Errorf("delivered packet %d: %d bytes, not the one sent (%d bytes)", k, len(pl), sizes[k])
		}
		k++
	})
	if k != len(sizes) {
		t.Errorf("B delivered %d of %d; drops A %v, B %v", k, len(sizes), TotalDrops(r.a.Stats()), TotalDrops(r.b.Stats()))
	}
	return got
}

func reassembleOuter(t *testing.T, frames [][]byte, mtu int) []outerDatagram {
	t.Helper()
	var out []outerDatagram
	var data []byte // the fragments so far of the datagram being put back together
	var id uint32
	var src, dst netip.Addr
	n := 0
	for i, fr := range frames {
		ip := fr[header.EthernetLen:]
		if len(ip) > mtu {
			t.Fatalf("frame %d: IP packet of %d bytes over the WAN MTU %d", i, len(ip), mtu)
		}
		var off int
		var more bool
		var payload []byte
		var fid uint32
		var s, d netip.Addr
		switch ip[0] >> 4 {
		case 4:
			h := header.IPv4(ip)
			if h.DontFragment() || !h.VerifyChecksum() || h.TotalLength() != len(ip) {
				t.Fatalf("frame %d: IPv4 header %x: DF set, bad checksum or length", i, ip[:20])
			}
			off, more, payload, fid = h.FragmentOffset(), h.MoreFragments(), ip[h.HeaderLen():], uint32(h.ID())
			s, d = h.Src(), h.Dst()
		case 6:
			if int(binary.BigEndian.Uint16(ip[4:6])) != len(ip)-header.IPv6Len {
				t.Fatalf("frame %d: IPv6 payload length %d of %d bytes", i, binary.BigEndian.Uint16(ip[4:6]), len(ip))
			}
			s, d = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
			payload = ip[header.IPv6Len:]
			if ip[6] == header.ProtoFragment {
				fh := payload[:header.IPv6FragmentLen]
				if fh[0] != header.ProtoUDP {
					t.Fatalf("frame %d: fragment of next header %d, want UDP", i, fh[0])
				}
				om := binary.BigEndian.Uint16(fh[2:4])
				off, more, fid = int(om&^7), om&1 != 0, binary.BigEndian.Uint32(fh[4:8])
				payload = payload[header.IPv6FragmentLen:]
			} else if ip[6] != header.ProtoUDP {
				t.Fatalf("frame %d: next header %d", i, ip[6])
			}
		default:
			t.Fatalf("frame %d: not IP", i)
		}
		if off == 0 && !more && data == nil { // a whole datagram
			data, n = append([]byte(nil), payload...), 1
		} else {
			switch {
			case off == 0 && data == nil:
				id, src, dst, n = fid, s, d, 0
			case data == nil || off != len(data) || fid != id || s != src || d != dst:
				t.Fatalf("frame %d: fragment at %d (id %#x) does not follow %d bytes of datagram %#x", i, off, fid, len(data), id)
			}
			if more && len(payload)%8 != 0 {
				t.Fatalf("frame %d: %d data bytes in a fragment that is not the last", i, len(payload))
			}
			data = append(data, payload...)
			n++
			if more {
				continue
			}
		}
		u := header.UDP(data)
		if len(data) < header.UDPLen || int(u.Length()) != len(data) {
			t.Fatalf("frame %d: reassembled UDP datagram of %d bytes, its header says %d", i, len(data), u.Length())
		}
		out = append(out, outerDatagram{src: netip.AddrPortFrom(s, u.SrcPort()), dst: netip.AddrPortFrom(d, u.DstPort()),
			msg: data[header.UDPLen:], frags: n})
		data = nil
	}
	if data != nil {
		t.Fatalf("a datagram's last fragment is missing (%d bytes had come)", len(data))
	}
	return out
}

// TestOuterFragmented: an outer packet over the WAN MTU (Engine.SetWANMTU:
// a PPPoE WAN at 1,492 under the default tunnel MTU with IPv6 endpoints,
// or a WAN MTU lowered while running) leaves as IP fragments in its place
// in the batch, each within the MTU, which reassemble to a message the peer
// authenticates and delivers, as the Linux kernel fragments what its
// WireGuard sends. Before, it left whole, over the MTU: a real link or
// the WAN port dropped it.
func TestOuterFragmented(t *testing.T) {
	for _, tc := range []struct {
		name  string
		wan6  bool
		mtu   int
		frags int // of the full-size packet
	}{
		{"ipv4-1400", false, 1400, 2},
		{"ipv4-576", false, 576, 3},
		{"ipv6-1492", true, 1492, 2},
		{"ipv6-1280", true, 1280, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigConfig{wan6: tc.wan6})
			r.a.SetWANMTU(tc.mtu)
			sizes := []int{100, 1420 - 28, 200, 1420 - 28} // UDP payloads: full-size inner packets between small ones
			wantSrc, wantDst := netip.AddrPortFrom(wanAddrA, portA), netip.AddrPortFrom(wanAddrB, portB)
			if tc.wan6 {
				wantSrc, wantDst = netip.AddrPortFrom(wan6A, portA), netip.AddrPortFrom(wan6B, portB)
			}
			for i, dg := range sendFragmented(t, r, sizes, tc.frags, tc.mtu) {
				if dg.src != wantSrc || dg.dst != wantDst {
					t.Errorf("datagram %d: %v → %v, want %v → %v", i, dg.src, dg.dst, wantSrc, wantDst)
				}
			}
			s := r.a.Stats()[0]
			if s.OuterFragmented != 2 || s.OuterFragments != uint64(2*tc.frags) || s.Encrypted != uint64(len(sizes)) {
				t.Errorf("outer_fragmented %d, outer_fragments %d, encrypted %d; want 2, %d, %d",
					s.OuterFragmented, s.OuterFragments, s.Encrypted, 2*tc.frags, len(sizes))
			}
			if d := TotalDrops(r.a.Stats()); d.Total() != 0 || s.WAN.Drops.Total() != 0 {
				t.Errorf("drops: A %v, A's WAN port %v", d.List(), s.WAN.Drops.List())
			}
		})
	}
}

// TestOuterFragmentedNoBuffer: without free frames for the fragments, an
// outer packet over the WAN MTU is dropped and counted
// (fragment_no_buffer), and the pool gets every frame back.
func TestOuterFragmentedNoBuffer(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.a.SetWANMTU(1000)
	tx := r.hostA.Queue(0).TX()
	f := udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1000, 2000, seqPayload(1, 1392))
	sendAll(t, r.hostA, 0, []dataplane.Frame{f})
	// Take every free frame of A's WAN pool (which its LAN shares).
	wanTX := r.wanA.Queue(0).TX()
	held := takeAll(wanTX)
	r.a.workers[0].outbound(r.clock.Now())
	wanTX.Free(held)
	if n := recvAll(t, r.wanB, 1, 20*time.Millisecond, nil); n != 0 {
		t.Errorf("%d frames left A", n)
	}
	if d := TotalDrops(r.a.Stats()); d[DropFragmentNoBuffer] != 1 || d.Total() != 1 {
		t.Errorf("drops %v, want fragment_no_buffer=1", d.List())
	}
}

// TestOuterFragmentIDsPerWorker: the identifications of outer fragments
// come from one sequence per worker, worker i's at base + i stepping by
// the number of workers, so two workers never give one identification to
// fragments toward the same peer (whose reassembly would mix them: with
// every worker counting from one start, a gateway with light traffic sent
// fragments with the same identifications from every queue at once).
func TestOuterFragmentIDsPerWorker(t *testing.T) {
	for _, wan6 := range []bool{false, true} {
		r := newRig(t, rigConfig{queues: 2, wan6: wan6})
		r.a.SetWANMTU(1280)
		ids := map[int][]uint32{} // by worker
		for round := range 3 {
			for q := range 2 {
				sendAll(t, r.hostA, q, []dataplane.Frame{frameToQueue(t, r, q, seqPayload(uint32(round), 1392))})
				r.a.workers[q].outbound(r.clock.Now())
				first := true
				recvAll(t, r.wanB, 2, 100*time.Millisecond, func(_ int, d []byte) {
					ip := d[header.EthernetLen:]
					var id uint32
					if wan6 {
						id = binary.BigEndian.Uint32(ip[header.IPv6Len+4 : header.IPv6Len+8])
					} else {
						id = uint32(header.IPv4(ip).ID())
					}
					if first {
						ids[q] = append(ids[q], id)
						first = false
					} else if last := ids[q][len(ids[q])-1]; id != last {
						t.Errorf("wan6 %v, worker %d: fragments of one packet with identifications %#x and %#x", wan6, q, last, id)
					}
				})
			}
		}
		mask := uint32(0xffff)
		if wan6 {
			mask = 0xffffffff
		}
		for q, s := range ids {
			for i := 1; i < len(s); i++ {
				if s[i] != (s[i-1]+2)&mask {
					t.Errorf("wan6 %v, worker %d: identifications %#x, want each 2 past the last", wan6, q, s)
					break
				}
			}
		}
		if len(ids[0]) != 3 || len(ids[1]) != 3 || (ids[0][0]-ids[1][0])%2 == 0 {
			t.Errorf("wan6 %v: identifications %#x (worker 0) and %#x (worker 1), want three each, of different parity", wan6, ids[0], ids[1])
		}
	}
}

// frameToQueue is a LAN frame from hostA to hostB with payload, of a flow
// whose frames land on A's queue q (memport's RSS).
func frameToQueue(t *testing.T, r *rig, q int, payload []byte) dataplane.Frame {
	t.Helper()
	tx := r.hostA.Queue(q).TX()
	for sport := uint16(1000); ; sport++ {
		f := udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, sport, 2000, payload)
		if memport.RSSQueue(f.Data(), r.lanA.NumQueues()) == q {
			return f
		}
		tx.Free([]dataplane.Frame{f})
	}
}

// TestOuterIPv4IDsPerWorker: the identifications of whole outer IPv4
// packets, which a router on the way may fragment (DF is clear), come from
// disjoint sequences per worker too. Before, every worker counted from 1:
// at light load two queues sent one identification to the same peer at
// once, and a path that fragmented both packets had the peer's
// reassembly mix them up.
func TestOuterIPv4IDsPerWorker(t *testing.T) {
	r := newRig(t, rigConfig{queues: 2})
	ids := map[int][]uint16{}
	for round := range 3 {
		for q := range 2 {
			sendAll(t, r.hostA, q, []dataplane.Frame{frameToQueue(t, r, q, seqPayload(uint32(round), 100))})
			r.a.workers[q].outbound(r.clock.Now())
			recvAll(t, r.wanB, 1, 100*time.Millisecond, func(_ int, d []byte) {
				ids[q] = append(ids[q], header.IPv4(d[header.EthernetLen:]).ID())
			})
		}
	}
	for q, s := range ids {
		for i := 1; i < len(s); i++ {
			if s[i] != s[i-1]+2 {
				t.Errorf("worker %d: identifications %#x, want each 2 past the last", q, s)
				break
			}
		}
	}
	if len(ids[0]) != 3 || len(ids[1]) != 3 || (ids[0][0]-ids[1][0])%2 == 0 {
		t.Errorf("identifications %#x (worker 0) and %#x (worker 1), want three each, of different parity", ids[0], ids[1])
	}
}

// BenchmarkEncryptPathFragmented measures outbound's path for 1,420-byte
// packets whose outer packets leave whole (wan1500) and cut in two
// (wan1280: Engine.SetWANMTU), side by side: what outer fragmentation
// costs a packet (two frames, the copy of the second half, one Transmit
// for the batch). path-ns/pkt is the worker's outbound call alone.
func BenchmarkEncryptPathFragmented(b *testing.B) {
	for _, mtu := range []int{1500, 1280} {
		b.Run(fmt.Sprintf("wan%d", mtu), func(b *testing.B) {
			r := newRig(b, rigConfig{onePool: true})
			r.a.SetWANMTU(mtu)
			frames := make([]dataplane.Frame, 256)
			tmpl := templateFrame(b, r, udpPayloadFor(1420))
			tx := r.hostA.Queue(0).TX()
			wrx := r.wanB.Queue(0).RX()
			w := r.a.workers[0]
			var path time.Duration
			b.SetBytes(1420)
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; done += 64 {
				n := tx.Alloc(frames[:64])
				for i := range n {
					frames[i].SetLen(len(tmpl))
					copy(frames[i].Data(), tmpl)
				}
				tx.Transmit(frames[:n])
				t0 := time.Now()
				w.outbound(0)
				path += time.Since(t0)
				for {
					m := wrx.Receive(frames)
					if m == 0 {
						break
					}
					wrx.Free(frames[:m])
				}
			}
			b.ReportMetric(float64(path.Nanoseconds())/float64(b.N), "path-ns/pkt")
			if d := TotalDrops(r.a.Stats()); d.Total() != 0 {
				b.Fatalf("drops %v", d.List())
			}
		})
	}
}

// sendSizes puts on A's LAN (queue 0) one UDP frame from hostA to hostB
// for each of sizes, the payload of frame i seqPayload(i, sizes[i]).
func sendSizes(t testing.TB, r *rig, sizes []int) {
	t.Helper()
	tx := r.hostA.Queue(0).TX()
	frames := make([]dataplane.Frame, len(sizes))
	for i, n := range sizes {
		frames[i] = udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1000, 2000, seqPayload(uint32(i), n))
	}
	sendAll(t, r.hostA, 0, frames)
}

// takeAll allocates every free frame of tx's pool and returns them, for
// the caller to free: a pool run dry.
func takeAll(tx dataplane.TX) []dataplane.Frame {
	var held []dataplane.Frame
	for {
		var b [256]dataplane.Frame
		n := tx.Alloc(b[:])
		held = append(held, b[:n]...)
		if n == 0 {
			return held
		}
	}
}

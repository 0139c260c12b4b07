package fastpath

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/reassembly"
)

// outerFragments builds the IP packet of a UDP datagram carrying msg from
// gateway A to gateway B (IPv4 without DF, or IPv6) with its checksum,
// and cuts it into fragments of at most mtu bytes, the last first.
func outerFragments(t testing.TB, v6 bool, msg []byte, id uint32, mtu int) [][]byte {
	t.Helper()
	return cutFragments(t, outerUDP(v6, portA, portB, msg), id, mtu)
}

// outerUDP builds the IP packet of a UDP datagram carrying msg from
// gateway A's WAN address and port sport to B's and dport, with its
// checksum.
func outerUDP(v6 bool, sport, dport uint16, msg []byte) []byte {
	src, dst := wanAddrA, wanAddrB
	iphl := header.IPv4MinLen
	if v6 {
		src, dst, iphl = wan6A, wan6B, header.IPv6Len
	}
	pkt := make([]byte, iphl+header.UDPLen+len(msg))
	if v6 {
		h := header.IPv6Fields{NextHeader: header.ProtoUDP, Src: src.As16(), Dst: dst.As16()}
		header.PutIPv6(pkt, &h, header.UDPLen+len(msg))
	} else {
		h := header.IPv4Fields{Protocol: header.ProtoUDP, Src: src.As4(), Dst: dst.As4()}
		header.PutIPv4(pkt, &h, header.UDPLen+len(msg))
	}
	header.PutUDP(pkt[iphl:], sport, dport, len(msg))
	copy(pkt[iphl+header.UDPLen:], msg)
	u := header.UDP(pkt[iphl:])
	u.SetChecksum(header.PseudoHeaderChecksum(header.ProtoUDP, src, dst, u.Length()))
	return pkt
}

// cutFragments cuts the IP packet pkt (IPv4 without DF, or IPv6 without
// extension headers) into fragments of at most mtu bytes with
// identification id, the last first.
func cutFragments(t testing.TB, pkt []byte, id uint32, mtu int) [][]byte {
	t.Helper()
	var out [][]byte
	if pkt[0]>>4 == header.IPv6Version {
		var f header.IPv6Fragmenter
		if r := f.Reset(pkt, mtu, id); r != header.OK || f.Count() < 2 {
			t.Fatalf("IPv6Fragmenter.Reset = %v, %d fragments", r, f.Count())
		}
		for i := f.Count() - 1; i >= 1; i-- {
			b := make([]byte, f.Len(i))
			f.Put(b, i)
			out = append(out, b)
		}
		b := make([]byte, f.Len(0))
		f.PutFirst(b)
		return append(out, b)
	}
	binary.BigEndian.PutUint16(pkt[4:6], uint16(id))
	header.IPv4(pkt).SetChecksum()
	var f header.IPv4Fragmenter
	if r := f.Reset(pkt, mtu); r != header.OK || f.Count() < 2 {
		t.Fatalf("IPv4Fragmenter.Reset = %v, %d fragments", r, f.Count())
	}
	for i := f.Count() - 1; i >= 1; i-- {
		b := make([]byte, f.Len(i))
		f.Put(b, i)
		out = append(out, b)
	}
	n := f.PutFirst()
	return append(out, pkt[:n])
}

// sendWAN transmits IP packets to gateway B's WAN port in frames from A's.
func (r *rig) sendWAN(pkts ...[]byte) {
	for _, p := range pkts {
		sendAll(r.t, r.wanA, 0, []dataplane.Frame{ipFrame(r.t, r.wanA.Queue(0).TX(), r.wanB.MAC(), r.wanA.MAC(), p)})
	}
}

// reassembleAll runs B's worker over what its WAN received.
func (r *rig) reassembleAll() {
	for r.b.workers[0].inbound(r.clock.Now()) > 0 {
	}
}

// TestReassembleWAN: with Config.Reassemble (the owned address mode), the
// WireGuard datagrams that reach the WAN port as IP fragments, IPv4 and
// IPv6, in any order, are reassembled and delivered; a fragment to
// another address, a bad checksum, a duplicate and a timeout are counted
// by reason. Without it the fragments are wan_malformed.
func TestReassembleWAN(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(map[bool]string{false: "ipv4", true: "ipv6"}[v6], func(t *testing.T) {
			r := newRig(t, rigConfig{reassemble: true, wan6: v6})
			msgs := capture(t, r, 4)
			frags := outerFragments(t, v6, msgs[0], 1, 96)
			rand.New(rand.NewPCG(1, 1)).Shuffle(len(frags), func(i, j int) { frags[i], frags[j] = frags[j], frags[i] })
			r.sendWAN(frags...)
			r.reassembleAll()
			if n := recvAll(t, r.hostB, 1, 50*time.Millisecond, nil); n != 1 {
				st, _ := r.b.ReassemblyStats()
				t.Fatalf("delivered %d from %d fragments, want 1; drops %v; reassembly %+v", n, len(frags), TotalDrops(r.b.Stats()), st)
			}
			st, ok := r.b.ReassemblyStats()
			if !ok || st.Fragments != uint64(len(frags)) || st.Reassembled != 1 || st.Drops.Total() != 0 || st.InProgress != 0 {
				t.Errorf("reassembly stats %+v, want %d fragments, 1 datagram", st, len(frags))
			}
			for _, q := range r.b.Stats() {
				if q.FromKernel != 0 {
					t.Errorf("FromKernel %d, want 0", q.FromKernel)
				}
			}

			// A bad UDP checksum: the datagram is refused whole.
			bad := outerFragments(t, v6, msgs[1], 2, 96)
			last := bad[0]
			last[len(last)-1] ^= 1
			r.sendWAN(bad...)
			// A duplicate: the first fragment of another datagram twice.
			ov := outerFragments(t, v6, msgs[2], 3, 96)
			r.sendWAN(ov[len(ov)-1], ov[len(ov)-1])
			r.reassembleAll()
			if n := recvAll(t, r.hostB, 1, 20*time.Millisecond, nil); n != 0 {
				t.Errorf("delivered %d of a bad checksum or an overlap", n)
			}
			st, _ = r.b.ReassemblyStats()
			if st.Drops[reassembly.DropUDPChecksum] != uint64(len(bad)) || st.Drops[reassembly.DropDuplicate] != 1 {
				t.Errorf("reassembly drops %v, want udp_checksum=%d duplicate=1", st.Drops.List(), len(bad))
			}

			// A fragment to another address is not for us.
			other := outerFragments(t, v6, msgs[3], 4, 96)
			o := other[0]
			if v6 {
				o[39] ^= 1
			} else {
				o[19] ^= 1
				header.IPv4(o).SetChecksum()
			}
			r.sendWAN(o)
			r.reassembleAll()
			if d := TotalDrops(r.b.Stats()); d[DropNotForUs] != 1 {
				t.Errorf("drops %v, want not_for_us=1", d.List())
			}
			// Nor is one from a martian source (loopback), never reassembled.
			m := outerFragments(t, v6, msgs[3], 5, 96)[0]
			if v6 {
				copy(m[8:24], netip.IPv6Loopback().AsSlice())
			} else {
				m[12] = 127
				header.IPv4(m).SetChecksum()
			}
			r.sendWAN(m)
			r.reassembleAll()
			if d := TotalDrops(r.b.Stats()); d[DropWANMartian] != 1 {
				t.Errorf("drops %v, want wan_martian=1", d.List())
			}

			// The clock passes the timeout: the datagram of the duplicate
			// is dropped (runReassembly's turn).
			if st, _ := r.b.ReassemblyStats(); st.InProgress != 1 {
				t.Errorf("in progress %d, want 1", st.InProgress)
			}
			r.clock.Advance(time.Minute + time.Second)
			r.b.expireReassembly()
			if st, _ := r.b.ReassemblyStats(); st.InProgress != 0 || st.Drops[reassembly.DropTimeout] != 1 {
				t.Errorf("after the timeout: %+v, want none in progress, timeout=1", st)
			}
		})
	}
	// Without Config.Reassemble, a fragment is malformed.
	r := newRig(t, rigConfig{})
	r.sendWAN(outerFragments(t, false, capture(t, r, 1)[0], 1, 96)...)
	for r.b.workers[0].inbound(r.clock.Now()) > 0 {
	}
	if d := TotalDrops(r.b.Stats()); d[DropWANMalformed] == 0 {
		t.Errorf("drops %v without Reassemble, want wan_malformed", d.List())
	}
	if _, ok := r.b.ReassemblyStats(); ok {
		t.Error("ReassemblyStats ok without Reassemble")
	}
}

// TestReassembleWANAllocs: a fragment costs no allocation from the WAN
// port through the reassembler (the reassembler's copy into its arena),
// nor a datagram it completes (wrapped in a frame of the WAN pool and
// handled as one received; here a replay after the first), IPv4 and IPv6.
func TestReassembleWANAllocs(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		r := newRig(t, rigConfig{reassemble: true, wan6: v6})
		msg := capture(t, r, 1)[0]
		var firsts, all [][]byte
		for id := range uint32(64) {
			fs := outerFragments(t, v6, msg, id, 96)
			firsts = append(firsts, fs[len(fs)-1]) // none completes
			all = append(all, fs...)
		}
		frames := make([]dataplane.Frame, 1)
		send := func(p []byte) {
			tx := r.wanA.Queue(0).TX()
			tx.Alloc(frames)
			frames[0].SetLen(header.EthernetLen + len(p))
			b := frames[0].Data()
			header.PutEthernet(b, header.MAC(r.wanB.MAC()), header.MAC(r.wanA.MAC()), map[bool]uint16{false: header.EtherTypeIPv4, true: header.EtherTypeIPv6}[v6])
			copy(b[header.EthernetLen:], p)
			tx.Transmit(frames)
			r.b.workers[0].inbound(r.clock.Now())
		}
		i := 0
		allocs := testing.AllocsPerRun(1000, func() {
			send(firsts[i%len(firsts)])
			i++
		})
		if allocs != 0 {
			t.Errorf("v6=%v: %v allocations per fragment", v6, allocs)
		}
		if st, _ := r.b.ReassemblyStats(); st.Fragments < 1000 || st.InProgress != uint64(len(firsts)) {
			t.Errorf("stats %+v, want %d datagrams in progress", st, len(firsts))
		}
		before, _ := r.b.ReassemblyStats()
		i = 0
		allocs = testing.AllocsPerRun(1000, func() {
			send(all[i%len(all)])
			i++
		})
		if allocs != 0 {
			t.Errorf("v6=%v: %v allocations per fragment, datagrams completed", v6, allocs)
		}
		after, _ := r.b.ReassemblyStats()
		if after.Reassembled-before.Reassembled < 100 || TotalDrops(r.b.Stats())[DropReplay] == 0 {
			t.Errorf("%d datagrams reassembled, drops %v; want them replays", after.Reassembled-before.Reassembled, TotalDrops(r.b.Stats()).List())
		}
	}
}

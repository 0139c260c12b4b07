package fastpath

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/reassembly"
)

// TestReassembledRefused: what the reassembler completes is judged as
// Linux judges a datagram for its socket, and what fails is counted, never
// delivered: a UDP checksum of zero (accepted over IPv4, RFC 768; refused
// over IPv6, RFC 8200 §8.1), another port (not_for_us), a UDP length past
// the datagram (udp_malformed), a payload that is no WireGuard message
// (the engine's bad_type), a datagram larger than a frame (wan_too_big).
func TestReassembledRefused(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(map[bool]string{false: "ipv4", true: "ipv6"}[v6], func(t *testing.T) {
			r := newRig(t, rigConfig{reassemble: true, wan6: v6})
			msgs := capture(t, r, 2)
			iphl := header.IPv4MinLen
			if v6 {
				iphl = header.IPv6Len
			}
			var want [reassembly.NumDropReasons]uint64
			var wantDrops [NumDropReasons]uint64
			var frags uint64
			send := func(pkt []byte, id uint32) uint64 {
				t.Helper()
				fs := cutFragments(t, pkt, id, 96)
				frags += uint64(len(fs))
				r.sendWAN(fs...)
				r.reassembleAll()
				return uint64(len(fs))
			}
			check := func(what string, wantDelivered int) {
				t.Helper()
				if n := recvAll(t, r.hostB, wantDelivered+1, 20*time.Millisecond, nil); n != wantDelivered {
					t.Errorf("%s: delivered %d, want %d", what, n, wantDelivered)
				}
				st, _ := r.b.ReassemblyStats()
				for why := range reassembly.NumDropReasons {
					if st.Drops[why] != want[why] {
						t.Errorf("%s: reassembly drops %v, want %v=%d", what, st.Drops.List(), why, want[why])
					}
				}
				if st.Fragments != frags || st.InProgress != 0 {
					t.Errorf("%s: reassembly %+v, want %d fragments, none in progress", what, st, frags)
				}
				d := TotalDrops(r.b.Stats())
				for why := range NumDropReasons {
					if uint64(d[why]) != wantDrops[why] {
						t.Errorf("%s: drops %v, want %v=%d", what, d.List(), why, wantDrops[why])
					}
				}
			}

			// A checksum of zero.
			pkt := outerUDP(v6, portA, portB, msgs[0])
			binary.BigEndian.PutUint16(pkt[iphl+6:], 0)
			n := send(pkt, 1)
			if v6 {
				want[reassembly.DropUDPChecksum] += n
				check("checksum 0", 0)
			} else {
				check("checksum 0", 1)
			}

			// Another port.
			pkt = outerUDP(v6, portA, portB+1, msgs[1])
			want[reassembly.DropNotForUs] += send(pkt, 2)
			check("another port", 0)

			// A UDP length past the datagram (the IP length shorter
			// than the UDP header says).
			pkt = outerUDP(v6, portA, portB, msgs[1])
			binary.BigEndian.PutUint16(pkt[iphl+4:], uint16(len(pkt)-iphl+8))
			want[reassembly.DropUDPMalformed] += send(pkt, 3)
			check("UDP length", 0)

			// No WireGuard message.
			junk := make([]byte, 300)
			for i := range junk {
				junk[i] = byte(i)
			}
			send(outerUDP(v6, portA, portB, junk), 4)
			wantDrops[DropBadType]++
			check("not WireGuard", 0)

			// A datagram larger than a frame: a transport message of
			// 6,000 bytes (the engine drops it as any datagram too big
			// for a frame, before it opens it).
			big := make([]byte, 6000)
			copy(big, msgs[1][:16])
			send(outerUDP(v6, portA, portB, big), 5)
			wantDrops[DropWANTooBig]++
			check("larger than a frame", 0)
			if st, _ := r.b.ReassemblyStats(); st.Reassembled != 5 {
				t.Errorf("reassembled %d, want 5 (the refused ones too)", st.Reassembled)
			}
		})
	}
}

// TestReassembledNoBuffer: a datagram completed when the WAN pool has no
// free frame is counted (no_buffer), and the next one goes through.
func TestReassembledNoBuffer(t *testing.T) {
	r := newRig(t, rigConfig{reassemble: true})
	msgs := capture(t, r, 2)
	r.sendWAN(outerFragments(t, false, msgs[0], 1, 96)...)
	// Every free frame of B's pool taken.
	tx := r.wanB.Queue(0).TX()
	var held []dataplane.Frame
	buf := make([]dataplane.Frame, 64)
	for {
		n := tx.Alloc(buf)
		if n == 0 {
			break
		}
		held = append(held, buf[:n]...)
	}
	r.reassembleAll()
	if d := TotalDrops(r.b.Stats()); d[DropNoBuffer] != 1 {
		t.Errorf("drops %v, want no_buffer=1", d.List())
	}
	tx.Free(held)
	r.sendWAN(outerFragments(t, false, msgs[1], 2, 96)...)
	r.reassembleAll()
	if n := recvAll(t, r.hostB, 1, 50*time.Millisecond, nil); n != 1 {
		t.Errorf("delivered %d after the pool refilled, want 1", n)
	}
}

// TestAtomicFragment: an IPv6 packet with a Fragment header of offset 0
// and M clear (an atomic fragment, RFC 6946) is processed as a whole
// packet, in isolation from fragments of the same identification: it is
// delivered, and a datagram in progress under its identification is left
// alone.
func TestAtomicFragment(t *testing.T) {
	r := newRig(t, rigConfig{reassemble: true, wan6: true})
	msgs := capture(t, r, 2)
	// A datagram in progress with identification 7: all but its first
	// fragment.
	fs := outerFragments(t, true, msgs[0], 7, 96)
	r.sendWAN(fs[:len(fs)-1]...)
	// The atomic fragment, identification 7.
	pkt := outerUDP(true, portA, portB, msgs[1])
	atomic := make([]byte, len(pkt)+header.IPv6FragmentLen)
	copy(atomic, pkt[:header.IPv6Len])
	atomic[6] = header.ProtoFragment
	binary.BigEndian.PutUint16(atomic[4:6], uint16(len(pkt)-header.IPv6Len+header.IPv6FragmentLen))
	fh := atomic[header.IPv6Len:]
	fh[0] = header.ProtoUDP
	binary.BigEndian.PutUint32(fh[4:8], 7)
	copy(atomic[header.IPv6Len+header.IPv6FragmentLen:], pkt[header.IPv6Len:])
	r.sendWAN(atomic)
	r.reassembleAll()
	if n := recvAll(t, r.hostB, 2, 20*time.Millisecond, nil); n != 1 {
		t.Fatalf("delivered %d, want the atomic fragment's packet; drops %v", n, TotalDrops(r.b.Stats()).List())
	}
	// The datagram in progress completes.
	r.sendWAN(fs[len(fs)-1])
	r.reassembleAll()
	if n := recvAll(t, r.hostB, 2, 20*time.Millisecond, nil); n != 1 {
		st, _ := r.b.ReassemblyStats()
		t.Fatalf("delivered %d, want the datagram in progress; reassembly %+v", n, st)
	}
}

// TestReassembleQueuesConcurrently: two workers add the fragments of the
// same datagrams at once, each datagram's fragments split between them,
// while the timeout goroutine's work and the counters are read: every
// datagram is delivered once, and the counters add up (run with -race).
func TestReassembleQueuesConcurrently(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		r := newRig(t, rigConfig{reassemble: true, wan6: v6, queues: 2})
		const n = 200
		msgs := capture(t, r, 1)
		var per [2][][]byte // fragments per worker
		for id := range uint32(n) {
			// The same message each time: a replay after the first, and
			// yet each a datagram reassembled.
			for i, f := range outerFragments(t, v6, msgs[0], id, 96) {
				per[i%2] = append(per[i%2], f)
			}
		}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for i := range 2 {
			w := r.b.workers[i]
			wg.Go(func() {
				var bad [NumDropReasons]int32
				frame := make([]byte, header.EthernetLen, 2048)
				for _, f := range per[i] {
					frame = append(frame[:header.EthernetLen], f...)
					et := uint16(header.EtherTypeIPv4)
					if v6 {
						et = header.EtherTypeIPv6
					}
					header.PutEthernet(frame, header.MAC(r.wanB.MAC()), header.MAC(r.wanA.MAC()), et)
					if header.Parse(frame, &w.pkt) != header.ReasonFragment {
						t.Error("not a fragment")
						return
					}
					var lastWAN netip.Addr
					if w.wanFragment(frame, &bad, &lastWAN, r.clock.Now()) != 1 {
						t.Errorf("fragment refused: %v", bad)
						return
					}
					w.inboundReassembled(r.clock.Now())
				}
			})
		}
		var bg sync.WaitGroup
		bg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				r.b.expireReassembly()
				r.b.ReassemblyStats()
			}
		})
		wg.Wait()
		close(stop)
		bg.Wait()
		st, _ := r.b.ReassemblyStats()
		if st.Fragments != uint64(len(per[0])+len(per[1])) || st.Reassembled != n || st.InProgress != 0 || st.Drops.Total() != 0 {
			t.Errorf("v6=%v: reassembly %+v, want %d datagrams of %d fragments", v6, st, n, len(per[0])+len(per[1]))
		}
		d := TotalDrops(r.b.Stats())
		if got := recvAll(t, r.hostB, 2, 20*time.Millisecond, nil); got != 1 || d[DropReplay] != n-1 {
			t.Errorf("v6=%v: delivered %d, replays %d; want 1 and %d", v6, got, d[DropReplay], n-1)
		}
	}
}

package fastpath

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// checkUDP parses an Ethernet frame and returns the UDP payload, failing on
// any inconsistency (including a bad UDP checksum).
func checkUDP(t testing.TB, data []byte) (header.Packet, []byte) {
	t.Helper()
	var p header.Packet
	if r := header.Parse(data, &p); r != header.OK {
		t.Fatalf("Parse(delivered frame) = %v", r)
	}
	u := header.UDP(data[p.L4Off:])
	if !u.VerifyChecksum(header.PseudoHeaderChecksum(header.ProtoUDP, p.Src, p.Dst, u.Length())) {
		t.Fatalf("delivered UDP checksum does not verify")
	}
	return p, data[p.PayloadOff : p.PayloadOff+p.PayloadLen]
}

func TestForwardBothWays(t *testing.T) {
	for _, tc := range []struct {
		name     string
		src, dst netip.Addr
		size     int
	}{
		{"ipv4-64", hostAddrA, hostAddrB, 64 - 42},
		{"ipv4-1000", hostAddrA, hostAddrB, 1000},
		{"ipv4-max", hostAddrA, hostAddrB, 1420 - 28},
		{"ipv6-512", host6A, host6B, 512},
		{"ipv6-max", host6A, host6B, 1420 - 48},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigConfig{start: true})
			const count = 500
			// A → B
			var frames []dataplane.Frame
			for i := 0; i < count; i++ {
				frames = append(frames, udpFrame(t, r.hostA.Queue(0).TX(), r.lanA.MAC(), r.hostA.MAC(), tc.src, tc.dst, 1000, 2000, seqPayload(uint32(i), tc.size)))
				if len(frames) == 32 {
					sendAll(t, r.hostA, 0, frames)
					frames = frames[:0]
					time.Sleep(200 * time.Microsecond)
				}
			}
			sendAll(t, r.hostA, 0, frames)
			seen := make(map[uint32]bool)
			got := recvAll(t, r.hostB, count, 5*time.Second, func(q int, d []byte) {
				p, pl := checkUDP(t, d)
				if p.Src != tc.src || p.Dst != tc.dst {
					t.Errorf("delivered %v → %v, want %v → %v", p.Src, p.Dst, tc.src, tc.dst)
				}
				seq := binary.BigEndian.Uint32(pl)
				if !bytes.Equal(pl, seqPayload(seq, tc.size)) {
					t.Errorf("payload of packet %d differs", seq)
				}
				seen[seq] = true
			})
			if got != count || len(seen) != count {
				t.Fatalf("A→B delivered %d frames (%d distinct), want %d; drops A %v B %v", got, len(seen), count, r.a.Stats()[0].Drops, r.b.Stats()[0].Drops)
			}
			// B → A (B's keypair was promoted by A's data).
			frames = frames[:0]
			for i := 0; i < 10; i++ {
				frames = append(frames, udpFrame(t, r.hostB.Queue(0).TX(), r.lanB.MAC(), r.hostB.MAC(), tc.dst, tc.src, 2000, 1000, seqPayload(uint32(i), tc.size)))
			}
			sendAll(t, r.hostB, 0, frames)
			if got := recvAll(t, r.hostA, 10, 5*time.Second, func(q int, d []byte) { checkUDP(t, d) }); got != 10 {
				t.Fatalf("B→A delivered %d, want 10; drops B %v A %v", got, r.b.Stats()[0].Drops, r.a.Stats()[0].Drops)
			}
			if d := TotalDrops(r.a.Stats()); d != ([NumDropReasons]uint64{}) {
				t.Errorf("gateway A drops = %v, want none", d)
			}
			if d := TotalDrops(r.b.Stats()); d != ([NumDropReasons]uint64{}) {
				t.Errorf("gateway B drops = %v, want none", d)
			}
		})
	}
}

// pump runs one batch by hand: hostA sends n frames of size bytes, gwA's
// worker encrypts them, gwB's worker decrypts them, hostB drains them.
// It returns how many arrived at hostB.
func pump(t testing.TB, r *rig, frames []dataplane.Frame, tmpl []byte, n int) int {
	tx := r.hostA.Queue(0).TX()
	got := tx.Alloc(frames[:n])
	for i := 0; i < got; i++ {
		f := &frames[i]
		f.SetLen(len(tmpl))
		copy(f.Data(), tmpl)
	}
	sent := tx.Transmit(frames[:got])
	now := r.clock.Now()
	wa, wb := r.a.workers[0], r.b.workers[0]
	wa.outbound(now)
	wb.inbound(now)
	rx := r.hostB.Queue(0).RX()
	m := rx.Receive(frames)
	rx.Free(frames[:m])
	_ = sent
	return m
}

func templateFrame(t testing.TB, r *rig, size int) []byte {
	f := udpFrame(t, r.hostA.Queue(0).TX(), r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1000, 2000, seqPayload(1, size))
	b := append([]byte(nil), f.Data()...)
	r.hostA.Queue(0).TX().Free([]dataplane.Frame{f})
	return b
}

func TestZeroAllocsPerBatch(t *testing.T) {
	r := newRig(t, rigConfig{})
	frames := make([]dataplane.Frame, 64)
	tmpl := templateFrame(t, r, 64-42)
	// Warm up: promote B's keypair, grow per-peer state.
	if got := pump(t, r, frames, tmpl, 64); got != 64 {
		t.Fatalf("warm-up batch delivered %d of 64; drops A %v B %v", got, r.a.Stats()[0].Drops, r.b.Stats()[0].Drops)
	}
	allocs := testing.AllocsPerRun(200, func() {
		if got := pump(t, r, frames, tmpl, 64); got != 64 {
			t.Fatalf("batch delivered %d of 64", got)
		}
	})
	if allocs != 0 {
		t.Errorf("AllocsPerRun(encrypt+decrypt batch of 64) = %v, want 0", allocs)
	}
}

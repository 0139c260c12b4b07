package fastpath

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/protocol"
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
			if d := TotalDrops(r.a.Stats()); d != (DropCounts{}) {
				t.Errorf("gateway A drops = %v, want none", d)
			}
			if d := TotalDrops(r.b.Stats()); d != (DropCounts{}) {
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

// wanFrame builds a frame on the WAN wire toward gateway B with the given
// UDP payload (a WireGuard message, valid or not).
func wanFrame(t testing.TB, r *rig, payload []byte) dataplane.Frame {
	return udpFrame(t, r.wanA.Queue(0).TX(), r.wanB.MAC(), r.wanA.MAC(), wanAddrA, wanAddrB, portA, portB, payload)
}

// capture has A seal n packets and returns the transport messages (UDP
// payloads) as they left A, without delivering them.
func capture(t testing.TB, r *rig, n int) [][]byte {
	tmpl := templateFrame(t, r, 100)
	frames := make([]dataplane.Frame, 64)
	tx := r.hostA.Queue(0).TX()
	k := tx.Alloc(frames[:n])
	for i := 0; i < k; i++ {
		frames[i].SetLen(len(tmpl))
		copy(frames[i].Data(), tmpl)
	}
	tx.Transmit(frames[:k])
	r.a.workers[0].outbound(r.clock.Now())
	rx := r.wanB.Queue(0).RX()
	m := rx.Receive(frames)
	var out [][]byte
	for i := 0; i < m; i++ {
		var p header.Packet
		d := frames[i].Data()
		if header.Parse(d, &p) != header.OK {
			t.Fatal("A sent an unparsable frame")
		}
		out = append(out, append([]byte(nil), d[p.PayloadOff:p.PayloadOff+p.PayloadLen]...))
	}
	rx.Free(frames[:m])
	return out
}

func TestBadTransportDroppedAndCounted(t *testing.T) {
	r := newRig(t, rigConfig{})
	msgs := capture(t, r, 4)
	if len(msgs) != 4 {
		t.Fatalf("captured %d messages, want 4", len(msgs))
	}
	flip := func(b []byte, i int) []byte { c := append([]byte(nil), b...); c[i] ^= 1; return c }
	wrongIndex := append([]byte(nil), msgs[1]...)
	binary.LittleEndian.PutUint32(wrongIndex[4:8], binary.LittleEndian.Uint32(wrongIndex[4:8])+1)
	cases := []struct {
		name string
		msg  []byte
		want DropReason
	}{
		{"truncated", msgs[0][:20], DropShortData},
		{"bit-flipped ciphertext", flip(msgs[0], 40), DropAuth},
		{"bit-flipped tag", flip(msgs[0], len(msgs[0])-1), DropAuth},
		{"bit-flipped counter", flip(msgs[0], 8), DropAuth},
		{"wrong index", wrongIndex, DropUnknownIndex},
		{"unknown type", []byte{9, 0, 0, 0, 1, 2, 3, 4}, DropBadType},
		{"reserved bytes set", append([]byte{4, 1, 0, 0}, msgs[0][4:]...), DropBadType},
		{"runt", []byte{4}, DropBadType},
		{"counter at limit", func() []byte {
			c := append([]byte(nil), msgs[0]...)
			binary.LittleEndian.PutUint64(c[8:16], protocol.RejectAfterMessages)
			return c
		}(), DropCounterLimit},
	}
	wb := r.b.workers[0]
	deliver := func(msg []byte) int {
		f := wanFrame(t, r, msg)
		sendAll(t, r.wanA, 0, []dataplane.Frame{f})
		wb.inbound(r.clock.Now())
		return recvAll(t, r.hostB, 1, 20*time.Millisecond, nil)
	}
	for _, tc := range cases {
		before := TotalDrops(r.b.Stats())[tc.want]
		if got := deliver(tc.msg); got != 0 {
			t.Errorf("%s: delivered %d packets, want 0", tc.name, got)
		}
		if after := TotalDrops(r.b.Stats())[tc.want]; after != before+1 {
			t.Errorf("%s: drops[%v] went %d → %d, want +1", tc.name, tc.want, before, after)
		}
	}
	// The genuine message goes through once, then is a replay.
	if got := deliver(msgs[0]); got != 1 {
		t.Fatalf("genuine message delivered %d, want 1; drops %v", got, TotalDrops(r.b.Stats()))
	}
	before := TotalDrops(r.b.Stats())[DropReplay]
	if got := deliver(msgs[0]); got != 0 {
		t.Errorf("replayed message delivered %d, want 0", got)
	}
	if after := TotalDrops(r.b.Stats())[DropReplay]; after != before+1 {
		t.Errorf("drops[replay] went %d → %d, want +1", before, after)
	}
	// Late but inside the window: accepted.
	for _, m := range []int{3, 2, 1} {
		if got := deliver(msgs[m]); got != 1 {
			t.Errorf("reordered message %d delivered %d, want 1", m, got)
		}
	}
	// Unauthenticated garbage never moved the window: a high counter with
	// a bad tag did not make the genuine low ones stale (checked above).
}

func TestReplayInsideOneBatch(t *testing.T) {
	r := newRig(t, rigConfig{})
	msgs := capture(t, r, 2)
	frames := []dataplane.Frame{wanFrame(t, r, msgs[0]), wanFrame(t, r, msgs[1]), wanFrame(t, r, msgs[0])}
	sendAll(t, r.wanA, 0, frames)
	r.b.workers[0].inbound(r.clock.Now())
	if got := recvAll(t, r.hostB, 3, 50*time.Millisecond, nil); got != 2 {
		t.Errorf("batch with a duplicate delivered %d, want 2", got)
	}
	if d := TotalDrops(r.b.Stats())[DropReplay]; d != 1 {
		t.Errorf("drops[replay] = %d, want 1", d)
	}
}

func TestAllowedIPsSourceCheck(t *testing.T) {
	r := newRig(t, rigConfig{})
	// A sends a packet whose inner source (198.19.9.9) is not in B's
	// allowed IPs for A.
	f := udpFrame(t, r.hostA.Queue(0).TX(), r.lanA.MAC(), r.hostA.MAC(), netip.MustParseAddr("198.19.9.9"), hostAddrB, 1, 2, []byte("spoof"))
	sendAll(t, r.hostA, 0, []dataplane.Frame{f})
	r.a.workers[0].outbound(r.clock.Now())
	r.b.workers[0].inbound(r.clock.Now())
	if got := recvAll(t, r.hostB, 1, 20*time.Millisecond, nil); got != 0 {
		t.Errorf("spoofed inner source delivered %d, want 0", got)
	}
	if d := TotalDrops(r.b.Stats())[DropAllowedIPs]; d != 1 {
		t.Errorf("drops[allowed_ips] = %d, want 1", d)
	}
}

func TestNoRouteAndMalformedLAN(t *testing.T) {
	r := newRig(t, rigConfig{})
	tx := r.hostA.Queue(0).TX()
	noRoute := udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, netip.MustParseAddr("198.18.99.1"), 1, 2, []byte("x"))
	bad := udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, []byte("x"))
	bad.Data()[header.EthernetLen+2] = 0xff // IPv4 total length past the frame
	arp := udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, []byte("x"))
	arp.Data()[12], arp.Data()[13] = 0x08, 0x06
	sendAll(t, r.hostA, 0, []dataplane.Frame{noRoute, bad, arp})
	r.a.workers[0].outbound(r.clock.Now())
	d := TotalDrops(r.a.Stats())
	if d[DropNoRoute] != 1 || d[DropMalformed] != 1 || d[DropNotIP] != 1 {
		t.Errorf("drops no_route=%d malformed=%d not_ip=%d, want 1 each", d[DropNoRoute], d[DropMalformed], d[DropNotIP])
	}
}

func TestHeldUntilKeypair(t *testing.T) {
	r := newRig(t, rigConfig{noKeys: true})
	tx := r.hostA.Queue(0).TX()
	var frames []dataplane.Frame
	for i := 0; i < MaxHeldPerPeer+10; i++ {
		frames = append(frames, udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, seqPayload(uint32(i), 40)))
	}
	wa, wb := r.a.workers[0], r.b.workers[0]
	for len(frames) > 0 {
		k := min(len(frames), 64)
		sendAll(t, r.hostA, 0, frames[:k])
		frames = frames[k:]
		wa.outbound(r.clock.Now())
	}
	if !r.peerAB.HandshakeNeeded.Load() {
		t.Error("HandshakeNeeded not set with packets waiting")
	}
	s := r.a.Stats()[0]
	if s.Held != MaxHeldPerPeer || s.Drops[DropHeldOverflow] != 10 {
		t.Errorf("held = %d, held_overflow = %d; want %d and 10", s.Held, s.Drops[DropHeldOverflow], MaxHeldPerPeer)
	}
	r.installKeys()
	wa.flushHeld(r.clock.Now())
	wb.inbound(r.clock.Now())
	wb.inbound(r.clock.Now())
	wb.inbound(r.clock.Now())
	got := recvAll(t, r.hostB, MaxHeldPerPeer, time.Second, nil)
	if got != MaxHeldPerPeer {
		t.Errorf("after the keypair, %d held packets arrived, want %d; drops B %v", got, MaxHeldPerPeer, TotalDrops(r.b.Stats()))
	}
	if s := r.a.Stats()[0]; s.Held != 0 {
		t.Errorf("held after flush = %d, want 0", s.Held)
	}
}

func TestTooBigGetsICMP(t *testing.T) {
	r := newRig(t, rigConfig{mtu: 1280})
	tx := r.hostA.Queue(0).TX()
	for _, tc := range []struct {
		src, dst netip.Addr
		icmpType uint8
	}{
		{hostAddrA, hostAddrB, 3},
		{host6A, host6B, 2},
	} {
		f := udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), tc.src, tc.dst, 1, 2, make([]byte, 1400))
		sendAll(t, r.hostA, 0, []dataplane.Frame{f})
		r.a.workers[0].outbound(r.clock.Now())
		var got int
		recvAll(t, r.hostA, 1, time.Second, func(q int, d []byte) {
			var p header.Packet
			if rr := header.Parse(d, &p); rr != header.OK {
				t.Fatalf("ICMP reply does not parse: %v", rr)
			}
			if p.Dst != tc.src || d[p.L4Off] != tc.icmpType {
				t.Errorf("reply to %v type %d, want to %v type %d", p.Dst, d[p.L4Off], tc.src, tc.icmpType)
			}
			mtu := int(binary.BigEndian.Uint16(d[p.L4Off+6:]))
			if tc.icmpType == 2 {
				mtu = int(binary.BigEndian.Uint32(d[p.L4Off+4:]))
			}
			if mtu != 1280 {
				t.Errorf("reported MTU %d, want 1280", mtu)
			}
			got++
		})
		if got != 1 {
			t.Errorf("%v: %d ICMP replies, want 1", tc.dst, got)
		}
	}
	if d := TotalDrops(r.a.Stats())[DropTooBig]; d != 2 {
		t.Errorf("drops[too_big] = %d, want 2", d)
	}
}

func TestSourcePortsSpreadOverQueues(t *testing.T) {
	r := newRig(t, rigConfig{queues: 2, srcPorts: 16, start: true})
	// Many inner flows from host A: gateway A hashes each to one of 16
	// outer source ports, and memport's RSS spreads those over B's two
	// queues.
	tx := r.hostA.Queue(0).TX()
	const flows = 64
	var frames []dataplane.Frame
	for i := 0; i < flows; i++ {
		frames = append(frames, udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, uint16(10000+i), 2000, seqPayload(uint32(i), 32)))
	}
	sendAll(t, r.hostA, 0, frames)
	perQueue := make([]int, 2)
	got := recvAll(t, r.hostB, flows, 5*time.Second, func(q int, d []byte) { perQueue[q]++ })
	if got != flows {
		t.Fatalf("delivered %d, want %d; drops A %v B %v", got, flows, TotalDrops(r.a.Stats()), TotalDrops(r.b.Stats()))
	}
	// B's LAN queue = B's worker = B's WAN RX queue.
	if perQueue[0] == 0 || perQueue[1] == 0 {
		t.Errorf("flows per queue at B = %v, want both queues used", perQueue)
	}
	// One flow always takes one outer port.
	p1 := flowHash(ipOf(t, udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 10001, 2000, []byte("a"))))
	p2 := flowHash(ipOf(t, udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 10001, 2000, []byte("different payload"))))
	if p1 != p2 {
		t.Errorf("flowHash differs for one flow: %#x vs %#x", p1, p2)
	}
}

func ipOf(t testing.TB, f dataplane.Frame) []byte {
	return append([]byte(nil), f.Data()[header.EthernetLen:]...)
}

func TestHeldDroppedWhenHandshakeGivesUp(t *testing.T) {
	r := newRig(t, rigConfig{noKeys: true})
	tx := r.hostA.Queue(0).TX()
	frames := []dataplane.Frame{
		udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, []byte("one")),
		udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, []byte("two")),
	}
	sendAll(t, r.hostA, 0, frames)
	w := r.a.workers[0]
	w.outbound(r.clock.Now())
	if s := r.a.Stats()[0]; s.Held != 2 {
		t.Fatalf("held = %d, want 2", s.Held)
	}
	r.peerAB.FlushHeld.Store(true) // the control plane gave up
	w.flushHeld(r.clock.Now())
	s := r.a.Stats()[0]
	if s.Held != 0 || s.Drops[DropHandshakeGaveUp] != 2 {
		t.Errorf("after give-up: held = %d, drops[handshake_gave_up] = %d; want 0 and 2", s.Held, s.Drops[DropHandshakeGaveUp])
	}
}

func TestOuterUDPChecksum(t *testing.T) {
	for _, csum := range []bool{false, true} {
		r := newRig(t, rigConfig{csum4: csum})
		tx := r.hostA.Queue(0).TX()
		sendAll(t, r.hostA, 0, []dataplane.Frame{udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), hostAddrA, hostAddrB, 1, 2, []byte("x"))})
		r.a.workers[0].outbound(r.clock.Now())
		n := recvAll(t, r.wanB, 1, time.Second, func(q int, d []byte) {
			var p header.Packet
			if header.Parse(d, &p) != header.OK {
				t.Fatal("outer frame does not parse")
			}
			u := header.UDP(d[p.L4Off:])
			switch {
			case !csum && u.Checksum() != 0:
				t.Errorf("IPv4UDPChecksum off: outer checksum %#04x, want 0", u.Checksum())
			case csum && !u.VerifyChecksum(header.PseudoHeaderChecksum(header.ProtoUDP, p.Src, p.Dst, u.Length())):
				t.Errorf("IPv4UDPChecksum on: outer checksum %#04x does not verify", u.Checksum())
			}
		})
		if n != 1 {
			t.Fatalf("csum=%v: %d outer frames, want 1", csum, n)
		}
	}
}

// TestDataRoamsEndpoint: authenticated data or a keepalive from a new outer
// source moves B's endpoint for A there at the next publish (whitepaper §2,
// roaming), with the frame's source MAC as next hop when the WAN resolver
// does not know the new address; a source that stays current does not.
func TestDataRoamsEndpoint(t *testing.T) {
	for _, keepalive := range []bool{false, true} {
		name := "data"
		if keepalive {
			name = "keepalive"
		}
		t.Run(name, func(t *testing.T) {
			r := newRig(t, rigConfig{})
			ka, _ := r.installKeys()
			var msg []byte
			if keepalive {
				c, n := ka.ReserveNonces(1)
				if n != 1 {
					t.Fatal("no nonce")
				}
				msg = make([]byte, protocol.TransportHeaderSize)
				msg[0] = protocol.TypeTransport
				binary.LittleEndian.PutUint32(msg[4:8], ka.RemoteIndex)
				binary.LittleEndian.PutUint64(msg[8:16], c)
				msg = append(msg, ka.Seal(nil, nil, c)...)
			} else {
				msg = capture(t, r, 1)[0]
			}
			wb := r.b.workers[0]
			before := r.peerBA.Endpoint.Load()
			// From the current endpoint: no move.
			sendAll(t, r.wanA, 0, []dataplane.Frame{wanFrame(t, r, msg)})
			wb.inbound(r.clock.Now())
			recvAll(t, r.hostB, 1, 20*time.Millisecond, nil)
			wb.publish(r.clock.Now())
			if ep := r.peerBA.Endpoint.Load(); ep != before {
				t.Fatalf("endpoint moved to %+v on a packet from the current one", ep)
			}
			// The same session from a new address, port and MAC; a fresh
			// counter so that it is not a replay.
			if keepalive {
				c, _ := ka.ReserveNonces(1)
				binary.LittleEndian.PutUint64(msg[8:16], c)
				msg = append(msg[:protocol.TransportHeaderSize], ka.Seal(nil, nil, c)...)
			} else {
				msg = capture(t, r, 1)[0]
			}
			newSrc := netip.AddrPortFrom(netip.MustParseAddr("198.18.1.99"), 40000)
			newMAC := net.HardwareAddr{2, 0, 0, 0, 0, 0x99}
			f := udpFrame(t, r.wanA.Queue(0).TX(), r.wanB.MAC(), newMAC, newSrc.Addr(), wanAddrB, newSrc.Port(), portB, msg)
			sendAll(t, r.wanA, 0, []dataplane.Frame{f})
			wb.inbound(r.clock.Now())
			want := 1
			if keepalive {
				want = 0
			}
			if got := recvAll(t, r.hostB, want, 20*time.Millisecond, nil); got != want {
				t.Fatalf("delivered %d, want %d; drops %v", got, want, TotalDrops(r.b.Stats()))
			}
			wb.publish(r.clock.Now())
			ep := r.peerBA.Endpoint.Load()
			if ep.Dst != newSrc || ep.Src != wanAddrB || ep.DstMAC != [6]byte(newMAC) {
				t.Errorf("endpoint after roaming = %v from %v via %x, want %v from %v via %x",
					ep.Dst, ep.Src, ep.DstMAC, newSrc, wanAddrB, []byte(newMAC))
			}
		})
	}
}

// ipFrame puts an Ethernet header in front of the IP packet ip in a frame
// of tx's pool.
func ipFrame(t testing.TB, tx dataplane.TX, dstMAC, srcMAC net.HardwareAddr, ip []byte) dataplane.Frame {
	var fr [1]dataplane.Frame
	if tx.Alloc(fr[:]) != 1 {
		t.Fatal("Alloc: pool empty")
	}
	f := &fr[0]
	f.SetLen(header.EthernetLen + len(ip))
	et := uint16(header.EtherTypeIPv4)
	if ip[0]>>4 == 6 {
		et = header.EtherTypeIPv6
	}
	header.PutEthernet(f.Data(), header.MAC(dstMAC), header.MAC(srcMAC), et)
	copy(f.Data()[header.EthernetLen:], ip)
	return *f
}

// TestOddUpperLayersCrossTheTunnel: the gateway judges IP headers, not
// what follows them. Packets whose upper layer it cannot read (a truncated
// TCP header, GRE, UDP over IPv6 with checksum 0, an IPv6 extension header
// that runs past the packet) cross the tunnel both ways, byte for byte.
func TestOddUpperLayersCrossTheTunnel(t *testing.T) {
	r := newRig(t, rigConfig{})
	v4 := func(src, dst netip.Addr, proto uint8, payload []byte) []byte {
		b := make([]byte, header.IPv4MinLen+len(payload))
		f := header.IPv4Fields{Protocol: proto, Src: src.As4(), Dst: dst.As4()}
		header.PutIPv4(b, &f, len(payload))
		copy(b[header.IPv4MinLen:], payload)
		return b
	}
	v6 := func(src, dst netip.Addr, nh uint8, payload []byte) []byte {
		b := make([]byte, header.IPv6Len+len(payload))
		f := header.IPv6Fields{NextHeader: nh, Src: src.As16(), Dst: dst.As16()}
		header.PutIPv6(b, &f, len(payload))
		copy(b[header.IPv6Len:], payload)
		return b
	}
	odd := func(src, dst, src6, dst6 netip.Addr) map[string][]byte {
		return map[string][]byte{
			"truncated TCP header":   v4(src, dst, header.ProtoTCP, []byte{0, 1, 0, 2, 0, 0}),
			"GRE":                    v4(src, dst, 47, []byte{0, 0, 0x08, 0, 1, 2, 3, 4}),
			"UDP/IPv6 checksum 0":    v6(src6, dst6, header.ProtoUDP, []byte{0, 1, 0, 2, 0, 10, 0, 0, 'h', 'i'}),
			"IPv6 extension overrun": v6(src6, dst6, header.ProtoRouting, []byte{header.ProtoUDP, 9, 0, 0, 0, 0, 0, 0}),
		}
	}
	for _, dir := range []struct {
		name                 string
		host, lan, farHost   *memport.Port
		gw, far              *Engine
		src, dst, src6, dst6 netip.Addr
	}{
		{"A to B", r.hostA, r.lanA, r.hostB, r.a, r.b, hostAddrA, hostAddrB, host6A, host6B},
		{"B to A", r.hostB, r.lanB, r.hostA, r.b, r.a, hostAddrB, hostAddrA, host6B, host6A},
	} {
		for name, ip := range odd(dir.src, dir.dst, dir.src6, dir.dst6) {
			if r := header.ParseIP(ip, new(header.Packet)); !r.IPHeaderOK() {
				t.Fatalf("%s: ParseIP = %v, want a sound IP header", name, r)
			}
			sendAll(t, dir.host, 0, []dataplane.Frame{ipFrame(t, dir.host.Queue(0).TX(), dir.lan.MAC(), dir.host.MAC(), ip)})
			dir.gw.workers[0].outbound(r.clock.Now())
			dir.far.workers[0].inbound(r.clock.Now())
			var got []byte
			n := recvAll(t, dir.farHost, 1, 50*time.Millisecond, func(_ int, d []byte) {
				got = append([]byte(nil), d[header.EthernetLen:]...)
			})
			// Each gateway forwards it as a router: TTL or hop limit − 1.
			want := bytes.Clone(ip)
			header.Forward(want)
			header.Forward(want)
			if n != 1 || !bytes.Equal(got, want) {
				t.Errorf("%s, %s: received %d packets, %x; want %x; drops %v / %v",
					dir.name, name, n, got, want, TotalDrops(dir.gw.Stats()), TotalDrops(dir.far.Stats()))
			}
		}
	}
}

// TestReceiveWANFromKernel: a transport message that reached the host
// kernel instead of the ports (reassembled from IP fragments) and came in
// through Engine.ReceiveWAN is authenticated, replay-checked and delivered
// like a received frame, and counted; one larger than a frame is dropped
// and counted.
func TestReceiveWANFromKernel(t *testing.T) {
	r := newRig(t, rigConfig{})
	msgs := capture(t, r, 2)
	wb := r.b.workers[0]
	from, to := netip.AddrPortFrom(wanAddrA, portA), netip.AddrPortFrom(wanAddrB, portB)
	if !r.b.ReceiveWAN(0, from, to, msgs[0]) {
		t.Fatal("ReceiveWAN: mailbox full")
	}
	wb.drainMailbox(r.clock.Now())
	var got []byte
	if n := recvAll(t, r.hostB, 1, 50*time.Millisecond, func(_ int, d []byte) { _, got = checkUDP(t, d) }); n != 1 {
		t.Fatalf("delivered %d, want 1; drops %v", n, TotalDrops(r.b.Stats()))
	}
	if len(got) == 0 {
		t.Error("delivered an empty payload")
	}
	// The same message again is a replay, counted as such.
	r.b.ReceiveWAN(0, from, to, msgs[0])
	r.b.ReceiveWAN(0, from, to, make([]byte, 8000)) // larger than a frame
	wb.drainMailbox(r.clock.Now())
	if n := recvAll(t, r.hostB, 1, 20*time.Millisecond, nil); n != 0 {
		t.Errorf("a replay through ReceiveWAN delivered %d, want 0", n)
	}
	d := TotalDrops(r.b.Stats())
	if d[DropReplay] != 1 || d[DropWANTooBig] != 1 {
		t.Errorf("drops replay=%d wan_too_big=%d, want 1 each", d[DropReplay], d[DropWANTooBig])
	}
	var from3 uint64
	for _, q := range r.b.Stats() {
		from3 += q.FromKernel
	}
	if from3 != 3 {
		t.Errorf("FromKernel = %d, want 3", from3)
	}
	// A message from the kernel still goes through the frame path: the
	// second one, out of order, is accepted.
	r.b.ReceiveWAN(0, from, to, msgs[1])
	wb.drainMailbox(r.clock.Now())
	if n := recvAll(t, r.hostB, 1, 50*time.Millisecond, nil); n != 1 {
		t.Errorf("second message delivered %d, want 1", n)
	}
}

// TestTooBigICMPFollowsLANAddrs: the source of "fragmentation needed" and
// "packet too big" toward LAN hosts is the LAN address of the moment
// (SetLANAddrs), as Linux answers from the interface's addresses of now.
// Before, it was the address of start: a gateway whose LAN got its IPv6
// address after start (SLAAC, DHCPv6, an operator) sent no "packet too
// big" at all, and large IPv6 packets from the LAN vanished.
func TestTooBigICMPFollowsLANAddrs(t *testing.T) {
	r := newRig(t, rigConfig{mtu: 1280})
	tx := r.hostA.Queue(0).TX()
	send := func(src, dst netip.Addr) (replies int, from netip.Addr) {
		t.Helper()
		f := udpFrame(t, tx, r.lanA.MAC(), r.hostA.MAC(), src, dst, 1, 2, make([]byte, 1400))
		sendAll(t, r.hostA, 0, []dataplane.Frame{f})
		r.a.workers[0].outbound(r.clock.Now())
		recvAll(t, r.hostA, 1, 100*time.Millisecond, func(q int, d []byte) {
			var p header.Packet
			if rr := header.Parse(d, &p); rr != header.OK {
				t.Fatalf("ICMP reply does not parse: %v", rr)
			}
			replies++
			from = p.Src
		})
		return replies, from
	}
	r.a.SetLANAddrs(netip.Addr{}, netip.Addr{}) // no LAN address yet
	for _, dst := range []netip.Addr{hostAddrB, host6B} {
		src := hostAddrA
		if dst.Is6() {
			src = host6A
		}
		if n, _ := send(src, dst); n != 0 {
			t.Errorf("to %v without a LAN address: %d ICMP replies, want none", dst, n)
		}
	}
	new4, new6 := netip.MustParseAddr("198.18.9.1"), netip.MustParseAddr("2001:2:0:9::1")
	r.a.SetLANAddrs(new4, new6) // added while running
	for _, tc := range []struct{ src, dst, want netip.Addr }{{hostAddrA, hostAddrB, new4}, {host6A, host6B, new6}} {
		if n, from := send(tc.src, tc.dst); n != 1 || from != tc.want {
			t.Errorf("to %v after SetLANAddrs: %d ICMP replies from %v, want 1 from %v", tc.dst, n, from, tc.want)
		}
	}
	if d := TotalDrops(r.a.Stats())[DropTooBig]; d != 4 {
		t.Errorf("drops[too_big] = %d, want 4", d)
	}
}

package tundev

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/header"
)

// TestPortDeviceHostileOverMTU writes batches of random decrypted IPv4
// packets, to another peer (held to the tunnel MTU) and to the LAN (held
// to SetLANMTU's), at MTUs from 68 up: options Linux forwards of every
// kind (record route, timestamp, router alert, unknown ones with and
// without the copy flag, padding), headers of 20 to 60 bytes, with and
// without DF, packets that are themselves fragments (MF, offsets), sizes
// from 20 bytes to 3,000. Every packet read back or sent to the LAN is at
// most the MTU of its way with a right checksum; a packet's fragments
// reassemble to it with the hop taken (fragment 0 keeping every option,
// offsets from its own, its MF on the last); and each packet written is
// counted once: fragmented, sent or looped whole, or dropped by a reason.
func TestPortDeviceHostileOverMTU(t *testing.T) {
	for _, mtu := range []int{68, 69, 75, 76, 576, 1280, 1419, 1420} {
		for _, lan := range []bool{false, true} {
			rng := rand.New(rand.NewPCG(uint64(mtu), map[bool]uint64{false: 1, true: 2}[lan]))
			r, dst := routerRig(t, func(c *PortConfig) { c.MTU = mtu }), peerB
			if lan {
				r, dst = routerRig(t, nil), hostIP
				if err := r.dev.SetLANMTU(mtu); err != nil {
					t.Fatal(err)
				}
			}
			for round := range 30 {
				hostileRound(t, r, rng, dst, mtu, lan, uint16(round*16))
			}
		}
	}
}

// hostileRound writes one batch of hostilePackets to dst and checks what
// came out (TestPortDeviceHostileOverMTU).
func hostileRound(t *testing.T, r *portRig, rng *rand.Rand, dst netip.Addr, mtu int, lan bool, id uint16) {
	t.Helper()
	var sent, bufs [][]byte
	for i := range 1 + rng.IntN(8) {
		p := hostilePacket(rng, dst, id+uint16(i))
		sent = append(sent, p)
		bufs = append(bufs, append(make([]byte, 16), p...))
	}
	before := r.dev.Stats()
	r.dev.Write(bufs, 16)
	tunMTU, _ := r.dev.MTU()
	var out [][]byte
	for _, p := range r.readAll(t, int(r.dev.loop.n.Load()), 512) {
		if len(p) > tunMTU || !header.IPv4(p).VerifyChecksum() {
			t.Fatalf("MTU %d: read a %d-byte packet (tunnel MTU %d), checksum right %v", mtu, len(p), tunMTU, header.IPv4(p).VerifyChecksum())
		}
		if !bytes.Equal(p[12:16], tunIP.AsSlice()) { // not our error
			out = append(out, p)
		}
	}
	after := r.dev.Stats()
	if lan {
		for _, f := range r.collect(int(after.TXPackets - before.TXPackets)) {
			out = append(out, f[header.EthernetLen:])
		}
	}
	pieces := map[uint16][][]byte{}
	for _, p := range out {
		if len(p) > mtu || !header.IPv4(p).VerifyChecksum() {
			t.Fatalf("MTU %d: a %d-byte packet out, checksum right %v", mtu, len(p), header.IPv4(p).VerifyChecksum())
		}
		pid := binary.BigEndian.Uint16(p[4:6])
		pieces[pid] = append(pieces[pid], p)
	}
	whole := 0
	for _, p := range sent {
		fr := pieces[binary.BigEndian.Uint16(p[4:6])]
		want := hop(p)
		switch {
		case len(fr) == 1:
			if !bytes.Equal(fr[0], want) {
				t.Fatalf("MTU %d: packet out as %x, want %x", mtu, fr[0], want)
			}
			whole++
		case len(fr) > 1:
			checkPieces(t, fr, want)
		}
	}
	counted := int(after.Fragmented-before.Fragmented) + whole
	if lan {
		counted -= int(after.PeerToPeer - before.PeerToPeer) // none: all to the LAN
	}
	for k := range after.Drops {
		counted += int(after.Drops[k] - before.Drops[k])
	}
	if counted != len(sent) {
		t.Fatalf("MTU %d: %d packets written, %d counted (%+v, then %+v)", mtu, len(sent), counted, before, after)
	}
}

// checkPieces checks that fr, the fragments of want in order, reassemble
// to it: offsets from want's own, 8-byte multiples but for the last, MF
// but on the last (want's there), fragment 0 with want's header options.
func checkPieces(t *testing.T, fr [][]byte, want []byte) {
	t.Helper()
	w := header.IPv4(want)
	var data []byte
	for i, f := range fr {
		h, last := header.IPv4(f), i == len(fr)-1
		if h.FragmentOffset() != w.FragmentOffset()+len(data) || h.DontFragment() || h.TTL() != w.TTL() ||
			h.MoreFragments() != (!last || w.MoreFragments()) || !last && len(h.Payload())%8 != 0 {
			t.Fatalf("fragment %d of %d: offset %d (want %d), MF %v, DF %v, TTL %d, %d data bytes", i, len(fr),
				h.FragmentOffset(), w.FragmentOffset()+len(data), h.MoreFragments(), h.DontFragment(), h.TTL(), len(h.Payload()))
		}
		data = append(data, h.Payload()...)
	}
	if hl := w.HeaderLen(); !bytes.Equal(fr[0][:hl][20:], want[20:hl]) || !bytes.Equal(data, want[hl:]) {
		t.Fatalf("fragments reassemble to other options or data than %x", want)
	}
}

// hostilePacket is a random IPv4 packet from peer A to dst with
// identification id (see TestPortDeviceHostileOverMTU).
func hostilePacket(rng *rand.Rand, dst netip.Addr, id uint16) []byte {
	opts := hostileOptions(rng)
	hl := header.IPv4MinLen + len(opts)
	p := make([]byte, hl+rng.IntN(3000))
	p[0] = 0x40 | byte(hl/4)
	binary.BigEndian.PutUint16(p[2:4], uint16(len(p)))
	binary.BigEndian.PutUint16(p[4:6], id)
	var ff uint16
	if rng.IntN(5) == 0 {
		ff |= 0x4000 // DF
	}
	if rng.IntN(3) == 0 {
		ff |= 0x2000 // MF
	}
	if rng.IntN(3) == 0 {
		ff |= uint16(rng.IntN(500))
	}
	binary.BigEndian.PutUint16(p[6:8], ff)
	p[8] = byte(2 + rng.IntN(200))
	p[9] = []byte{1, 6, 17, 50}[rng.IntN(4)]
	copy(p[12:16], peerA.AsSlice())
	copy(p[16:20], dst.AsSlice())
	copy(p[20:], opts)
	for i := hl; i < len(p); i++ {
		p[i] = byte(rng.Uint32())
	}
	header.IPv4(p).SetChecksum()
	return p
}

// hostileOptions returns random IPv4 options, padded to 4 bytes, at most
// 40: a record route and a timestamp (at most one each, empty), router
// alerts, unknown options with and without the copy flag, no-operations.
func hostileOptions(rng *rand.Rand) []byte {
	var o []byte
	rr, ts := false, false
	for range rng.IntN(6) {
		var opt []byte
		switch rng.IntN(6) {
		case 0:
			opt = []byte{1}
		case 1:
			if !rr {
				rr, opt = true, make([]byte, 3+4*rng.IntN(3))
				opt[0], opt[1], opt[2] = 7, byte(len(opt)), 4
			}
		case 2:
			if !ts {
				ts, opt = true, []byte{68, 12, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0}
			}
		case 3:
			opt = []byte{148, 4, 0, 0}
		default: // unknown: copied (case 4) or not
			opt = make([]byte, 2+rng.IntN(6))
			opt[0], opt[1] = byte(20+rng.IntN(10)), byte(len(opt))
			if rng.IntN(2) == 0 {
				opt[0] |= 0x80
			}
		}
		o = append(o, opt...)
	}
	o = append(o, make([]byte, (4-len(o)%4)%4)...)
	if len(o) > 40 {
		return nil
	}
	return o
}

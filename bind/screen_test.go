package bind

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/protocol"
)

// wgMsg is a WireGuard message of type typ and n bytes (n >= 4), its body
// zero.
func wgMsg(typ uint32, n int) []byte {
	b := make([]byte, n)
	binary.LittleEndian.PutUint32(b, typ)
	return b
}

// TestScreen: with Config.Screen the datagrams stock wireguard-go drops
// uncounted (RoutineReceiveIncoming) are dropped and counted by reason,
// and every message it takes, of every type at its size (transport data
// of any length from 32 bytes), comes out whole; without Screen a
// datagram of any payload passes.
func TestScreen(t *testing.T) {
	from, to := netip.AddrPortFrom(peerIP4, 40000), netip.AddrPortFrom(ourIP4, ourPort)
	reserved := wgMsg(protocol.TypeTransport, 48)
	reserved[1] = 1
	bad := []struct {
		name string
		msg  []byte
		want DropReason
	}{
		{"empty", nil, DropBadType},
		{"3 bytes", []byte{4, 0, 0}, DropBadType},
		{"type 0", wgMsg(0, 148), DropBadType},
		{"type 5", wgMsg(5, 64), DropBadType},
		{"reserved byte set", reserved, DropBadType},
		{"transport of 31 bytes", wgMsg(protocol.TypeTransport, 31), DropShortData},
		{"initiation of 147 bytes", wgMsg(protocol.TypeInitiation, 147), DropWrongSize},
		{"initiation of 149 bytes", wgMsg(protocol.TypeInitiation, 149), DropWrongSize},
		{"response of 148 bytes", wgMsg(protocol.TypeResponse, 148), DropWrongSize},
		{"cookie reply of 92 bytes", wgMsg(protocol.TypeCookieReply, 92), DropWrongSize},
	}
	good := [][]byte{
		wgMsg(protocol.TypeInitiation, protocol.InitiationSize),
		wgMsg(protocol.TypeResponse, protocol.ResponseSize),
		wgMsg(protocol.TypeCookieReply, protocol.CookieReplySize),
		wgMsg(protocol.TypeTransport, protocol.KeepaliveSize),
		wgMsg(protocol.TypeTransport, 1400),
	}
	r := newRig(t, 1, func(c *Config) { c.Screen = true })
	var frames [][]byte
	for _, b := range bad {
		frames = append(frames, udpFrame(from, to, b.msg, false))
	}
	for _, g := range good {
		frames = append(frames, udpFrame(from, to, g, false))
	}
	r.inject(t, 0, frames...)
	bufs, sizes, eps := recvBufs()
	// One burst: the frames are all on the ring when receive reads it.
	if n, err := r.fns[0](bufs, sizes, eps); n != len(good) || err != nil {
		t.Fatalf("receive = %d, %v; want the %d messages wireguard-go takes (drops %v)", n, err, len(good), r.bind.Stats().Drops)
	}
	for i, g := range good {
		if sizes[i] != len(g) || binary.LittleEndian.Uint32(bufs[i]) != binary.LittleEndian.Uint32(g) {
			t.Errorf("message %d: %d bytes of type %d, want %d of type %d", i, sizes[i], bufs[i][0], len(g), g[0])
		}
	}
	want := map[DropReason]uint64{}
	for _, b := range bad {
		want[b.want]++
	}
	s := r.bind.Stats()
	for why, n := range want {
		if s.Drops[why] != n {
			t.Errorf("Drops[%v] = %d, want %d (all: %v)", why, s.Drops[why], n, s.Drops)
		}
	}
	if s.Drops.Total() != uint64(len(bad)) {
		t.Errorf("%d drops, want %d: %v", s.Drops.Total(), len(bad), s.Drops)
	}

	// Without Screen the Bind carries any payload.
	plain := newRig(t, 1, nil)
	plain.inject(t, 0, udpFrame(from, to, []byte("any payload"), false))
	if n, err := plain.fns[0](bufs, sizes, eps); n != 1 || err != nil || string(bufs[0][:sizes[0]]) != "any payload" {
		t.Errorf("without Screen: receive = %d %q, %v; want the payload", n, bufs[0][:sizes[0]], err)
	}
}

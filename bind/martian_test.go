package bind

import (
	"net/netip"
	"testing"
)

// TestMartianSource: a datagram to us from a source Linux's IP input
// drops (header.MartianSource) is counted martian and never reaches
// wireguard-go, which would answer it (a cookie reply) or roam a peer's
// endpoint to it; they were handed on with that source as the endpoint
// (an IPv4-mapped one even as an IPv4 endpoint). A good one beside them
// is received.
func TestMartianSource(t *testing.T) {
	r := newRig(t, 1, nil)
	var frames [][]byte
	srcs := []string{"0.0.0.0", "127.0.0.1", "224.0.0.1", "255.255.255.255", "::", "::1", "ff02::1", "::ffff:198.18.9.2", "::ffff:127.0.0.1"}
	for _, s := range srcs {
		src := netip.MustParseAddr(s)
		dst := ourIP4
		if !src.Is4() {
			dst = ourIP6
		}
		frames = append(frames, udpFrame(netip.AddrPortFrom(src, 51821), netip.AddrPortFrom(dst, ourPort), []byte("x"), false))
	}
	frames = append(frames, udpFrame(netip.AddrPortFrom(peerIP6, 51821), netip.AddrPortFrom(ourIP6, ourPort), []byte("good"), false))
	before := r.bind.Stats()
	r.inject(t, 0, frames...)
	bufs, sizes, eps := recvBufs()
	n, err := r.fns[0](bufs, sizes, eps)
	if err != nil || n != 1 || string(bufs[0][:sizes[0]]) != "good" || eps[0].DstToString() != netip.AddrPortFrom(peerIP6, 51821).String() {
		t.Fatalf("receive = %d, %v; want the good datagram alone", n, err)
	}
	after := r.bind.Stats()
	if d := after.Drops[DropMartian] - before.Drops[DropMartian]; d != uint64(len(srcs)) || after.Drops.Total()-before.Drops.Total() != d {
		t.Errorf("martian +%d, all drops +%d; want %d, all of them martian", d, after.Drops.Total()-before.Drops.Total(), len(srcs))
	}
}

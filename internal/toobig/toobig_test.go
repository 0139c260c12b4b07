package toobig

import (
	"encoding/binary"
	"io"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/pathmtu"
)

var (
	ours   = netip.MustParseAddr("2001:db8:f1::1")
	peer   = netip.MustParseAddr("2001:db8:f2::2")
	router = netip.MustParseAddr("2001:db8:f1::fe")
)

// tooBig is a "packet too big" reporting mtu about a UDP packet from
// src:sport to dst (frag: as the first fragment of it, or with offset
// 8 a later one).
func tooBig(mtu uint32, src, dst netip.Addr, sport uint16, frag int) []byte {
	m := make([]byte, 8, 1280)
	m[0] = 2
	binary.BigEndian.PutUint32(m[4:8], mtu)
	ip := make([]byte, header.IPv6Len)
	ip[0] = 0x60
	ip[6] = header.ProtoUDP
	s, d := src.As16(), dst.As16()
	copy(ip[8:24], s[:])
	copy(ip[24:40], d[:])
	m = append(m, ip...)
	if frag > 0 {
		m[8+6] = header.ProtoFragment
		fh := make([]byte, header.IPv6FragmentLen)
		fh[0] = header.ProtoUDP
		binary.BigEndian.PutUint16(fh[2:4], uint16((frag-1)*8)|1)
		m = append(m, fh...)
	}
	udp := make([]byte, header.UDPLen+32)
	binary.BigEndian.PutUint16(udp[0:2], sport)
	binary.BigEndian.PutUint16(udp[2:4], 51820)
	return append(m, udp...)
}

// TestParse: a "packet too big" quoting UDP, whole or a first fragment,
// is read; a later fragment (no UDP header), another protocol, another
// type or code, or a cut quote is not.
func TestParse(t *testing.T) {
	want := TooBig{Src: ours, Dst: peer, SrcPort: 51820, MTU: 1400}
	for _, frag := range []int{0, 1} {
		if got, ok := Parse(tooBig(1400, ours, peer, 51820, frag)); !ok || got != want {
			t.Errorf("fragment %d: Parse = %+v, %v; want %+v", frag, got, ok, want)
		}
	}
	if got, ok := Parse(tooBig(1<<20, ours, peer, 51820, 0)); !ok || got.MTU != 65535 {
		t.Errorf("MTU 2^20: Parse = %+v, %v; want 65535", got, ok)
	}
	bad := map[string][]byte{"later fragment": tooBig(1400, ours, peer, 51820, 2)}
	m := tooBig(1400, ours, peer, 51820, 0)
	m[8+6] = header.ProtoTCP
	bad["TCP"] = m
	m = tooBig(1400, ours, peer, 51820, 0)
	m[0] = 1
	bad["destination unreachable"] = m
	m = tooBig(1400, ours, peer, 51820, 0)
	m[1] = 1
	bad["code 1"] = m
	bad["cut"] = tooBig(1400, ours, peer, 51820, 0)[:8+40+4]
	for name, m := range bad {
		if got, ok := Parse(m); ok {
			t.Errorf("%s: Parse = %+v, true; want false", name, got)
		}
	}
}

// setter is a Setter over a pathmtu.Table, as the senders are.
type setter struct{ pathmtu.Table }

func (s *setter) SetPathMTU(dst netip.Addr, mtu int) bool { return s.Set(dst, mtu) }
func (s *setter) PathMTUs() map[netip.Addr]int            { return s.All() }

// TestTake: an error is taken only about a packet of ours (Config.Ours)
// and with an MTU below the WAN's; below 1,280 it is taken as 1,280.
func TestTake(t *testing.T) {
	var s setter
	f := &Follower{cfg: Config{Setter: &s, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Ours:   func(src netip.Addr, sport uint16) bool { return src == ours && sport == 51820 },
		WANMTU: func() int { return 1500 }}}
	for _, c := range []struct {
		msg  []byte
		want int
	}{
		{tooBig(1400, ours, peer, 51821, 0), 0},    // another port
		{tooBig(1400, router, peer, 51820, 0), 0},  // another source
		{tooBig(1500, ours, peer, 51820, 0), 0},    // the WAN's
		{tooBig(1400, ours, peer, 51820, 1), 1400}, // ours, a first fragment
		{tooBig(600, ours, peer, 51820, 0), 1280},  // RFC 8201 §4
	} {
		dst, ok := f.take(c.msg, router)
		if got := s.All()[peer]; got != c.want || ok != (c.want != 0) || (ok && dst != peer) {
			t.Errorf("take(%x...) = %v, %v; path MTU %d, want %d", c.msg[:8], dst, ok, got, c.want)
		}
		s.Set(peer, 0)
	}
}

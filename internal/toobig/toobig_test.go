package toobig

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

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
// and with an MTU below the WAN's, from 1,280 (one below it is discarded,
// as Linux's kernel discards it: RFC 8201 §4).
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
		{tooBig(1280, ours, peer, 51820, 0), 1280}, // the least
		{tooBig(1279, ours, peer, 51820, 0), 0},    // RFC 8201 §4
		{tooBig(600, ours, peer, 51820, 0), 0},
		{tooBig(0, ours, peer, 51820, 0), 0},
	} {
		dst, ok := f.take(c.msg, router, time.Now())
		if got := s.All()[peer]; got != c.want || ok != (c.want != 0) || (ok && dst != peer) {
			t.Errorf("take(%x...) = %v, %v; path MTU %d, want %d", c.msg[:8], dst, ok, got, c.want)
		}
		f.forget(peer)
	}
}

// TestTakeLowersOnly: an error reporting an MTU above the endpoint's path
// MTU does not raise it, nor keep it longer; one reporting it again keeps
// it longer; a lower one lowers it, as Linux's kernel takes them (RFC 8201
// §4: a node MUST NOT increase its estimate from a "packet too big").
// Before, the last error won: a forged one with 1,450 after a router's
// 1,400 made every packet of 1,401 to 1,450 bytes toward the endpoint
// lost again at that router.
func TestTakeLowersOnly(t *testing.T) {
	var s setter
	f := &Follower{cfg: Config{Setter: &s, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Ours:   func(netip.Addr, uint16) bool { return true },
		WANMTU: func() int { return 1500 }}}
	t0 := time.Now()
	for i, c := range []struct {
		mtu, want int
		taken     bool
		at        time.Time
	}{
		{1400, 1400, true, t0},
		{1450, 1400, false, t0},
		{1400, 1400, true, t0.Add(time.Minute)},
		{1300, 1300, true, t0.Add(2 * time.Minute)},
		{1499, 1300, false, t0.Add(2 * time.Minute)},
	} {
		_, ok := f.take(tooBig(uint32(c.mtu), ours, peer, 51820, 0), router, c.at)
		if got := s.All()[peer]; got != c.want || ok != c.taken || f.set[peer].at != c.at {
			t.Errorf("%d: take(%d) = %v; path MTU %d, set at %v; want %v, %d, %v", i, c.mtu, ok, got, f.set[peer].at, c.taken, c.want, c.at)
		}
	}
}

// TestTakeFullEvicts: with pathmtu.MaxEntries endpoints' path MTUs set, an
// error about another endpoint forgets the one set longest ago and sets
// the new one, as Linux's kernel evicts the oldest of its route
// exceptions. Before, it was refused: 4,096 forged errors, one every
// 0.15 s, each quoting another address, kept every real endpoint's path
// MTU from being learnt, and full-size packets toward a peer behind a
// smaller link were lost for good.
func TestTakeFullEvicts(t *testing.T) {
	var s setter
	f := &Follower{cfg: Config{Setter: &s, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Ours:   func(netip.Addr, uint16) bool { return true },
		WANMTU: func() int { return 1500 }}}
	t0 := time.Now()
	first := netip.MustParseAddr("2001:db8:9::")
	for i := range pathmtu.MaxEntries {
		a := netip.MustParseAddr(fmt.Sprintf("2001:db8:9::%x", i))
		if _, ok := f.take(tooBig(1400, ours, a, 51820, 0), router, t0.Add(time.Duration(i)*time.Millisecond)); !ok {
			t.Fatalf("error %d not taken", i)
		}
	}
	// The first is refreshed: the second is now the oldest.
	f.take(tooBig(1400, ours, first, 51820, 0), router, t0.Add(time.Hour))
	if _, ok := f.take(tooBig(1400, ours, peer, 51820, 0), router, t0.Add(time.Hour)); !ok {
		t.Fatal("an error about a new endpoint refused with the table full")
	}
	all := s.All()
	second := netip.MustParseAddr("2001:db8:9::1")
	if len(all) != pathmtu.MaxEntries || all[peer] != 1400 || all[first] != 1400 || all[second] != 0 {
		t.Errorf("%d path MTUs; new endpoint %d, first %d, second %d; want %d, 1400, 1400, none",
			len(all), all[peer], all[first], all[second], pathmtu.MaxEntries)
	}
	if len(f.set) != pathmtu.MaxEntries {
		t.Errorf("the follower keeps %d endpoints, want %d", len(f.set), pathmtu.MaxEntries)
	}
}

// TestTakeFlood: a flood of forged errors, each about another address,
// costs little each and logs a bounded number of lines; the sweep after
// Expiry forgets every path MTU and says how many were not logged.
// Before, each error with the table full scanned the follower's 4,096
// entries, copied the sender's table twice (about a millisecond and
// 900 KB of garbage each: 1,000 forged errors a second, under a megabit,
// kept a core busy) and logged a line.
func TestTakeFlood(t *testing.T) {
	var s setter
	var lines []string
	f := &Follower{cfg: Config{Setter: &s, Log: slog.New(slog.NewTextHandler(lineWriter{&lines}, nil)),
		Ours:   func(netip.Addr, uint16) bool { return true },
		WANMTU: func() int { return 1500 }}}
	const n = 3 * pathmtu.MaxEntries
	msgs := make([][]byte, n)
	for i := range msgs {
		msgs[i] = tooBig(1400, ours, netip.AddrFrom16([16]byte{0x20, 0x01, 0xd, 0xb8, 9, 12: byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}), 51820, 0)
	}
	t0 := time.Now()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for i, m := range msgs {
		if _, ok := f.take(m, router, t0.Add(time.Duration(i)*time.Microsecond)); !ok {
			t.Fatalf("error %d not taken", i)
		}
	}
	runtime.ReadMemStats(&m1)
	if per := (m1.TotalAlloc - m0.TotalAlloc) / n; per > 64<<10 {
		t.Errorf("%d bytes allocated per forged error, want at most 64 KiB", per)
	}
	if len(lines) > logPerSweep {
		t.Errorf("%d lines logged for %d errors, want at most %d", len(lines), n, logPerSweep)
	}
	if all := s.All(); len(all) != pathmtu.MaxEntries || len(f.set) != pathmtu.MaxEntries {
		t.Errorf("%d path MTUs set, the follower keeps %d; want %d", len(all), len(f.set), pathmtu.MaxEntries)
	}
	f.sweep(t0.Add(Expiry + time.Second))
	if s.Load() != nil || len(f.set) != 0 || f.oldest != nil || f.newest != nil {
		t.Errorf("after Expiry: %d path MTUs set, the follower keeps %d", len(s.All()), len(f.set))
	}
	want := fmt.Sprintf("count=%d", n-logPerSweep+pathmtu.MaxEntries)
	if len(lines) != logPerSweep+1 || !strings.Contains(lines[len(lines)-1], want) {
		t.Errorf("logged %d lines, the last %q; want %d, the last with %s", len(lines), lines[len(lines)-1], logPerSweep+1, want)
	}
}

type lineWriter struct{ lines *[]string }

func (w lineWriter) Write(p []byte) (int, error) {
	*w.lines = append(*w.lines, string(p))
	return len(p), nil
}

package toobig

import (
	"log/slog"
	"net/netip"
	"testing"
	"time"
)

// FuzzTake feeds Parse arbitrary messages (no panic; a message taken
// names a UDP packet), and the follower a sequence of errors about a few
// endpoints, with sweeps: its list and map agree, the list is in time
// order, and the sender holds exactly the path MTUs the follower keeps.
//
//	go test ./internal/toobig -run '^$' -fuzz FuzzTake -fuzztime 60s
func FuzzTake(f *testing.F) {
	f.Add(tooBig(1400, ours, peer, 51820, 1), []byte{0, 0x10, 1, 1, 0x30, 2, 0xff, 0x80})
	f.Add(tooBig(1280, ours, peer, 51820, 0)[:60], []byte{3, 0, 3, 0, 3, 0xff})
	f.Fuzz(func(t *testing.T, msg []byte, ops []byte) {
		if tb, ok := Parse(msg); ok && (tb.MTU < 0 || tb.MTU > 65535 || !tb.Src.Is6() || !tb.Dst.Is6()) {
			t.Fatalf("Parse = %+v", tb)
		}
		var s setter
		fl := &Follower{cfg: Config{Setter: &s, Log: slog.New(slog.DiscardHandler),
			Ours:   func(src netip.Addr, sport uint16) bool { return src == ours && sport == 51820 },
			WANMTU: func() int { return 1500 }}}
		now := time.Unix(1e9, 0)
		fl.take(msg, router, now)
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i], ops[i+1]
			now = now.Add(time.Duration(op>>4) * time.Minute)
			if op&0xf == 0xf {
				fl.sweep(now)
				continue
			}
			dst := netip.AddrFrom16([16]byte{0x20, 0x01, 0xd, 0xb8, 15: op & 7})
			fl.take(tooBig(uint32(1270+int(arg)), ours, dst, 51820, int(op>>3&1)), router, now)
		}
		all := s.All()
		n := 0
		var prev *learnt
		for l := fl.oldest; l != nil; l = l.next {
			if l.prev != prev || fl.set[l.dst] != l || all[l.dst] != l.mtu || (prev != nil && l.at.Before(prev.at)) {
				t.Fatalf("list entry %v (mtu %d at %v) disagrees: prev %p/%p, map %p, sender %d", l.dst, l.mtu, l.at, l.prev, prev, fl.set[l.dst], all[l.dst])
			}
			prev = l
			n++
		}
		if prev != fl.newest || n != len(fl.set) || n != len(all) {
			t.Fatalf("list of %d, map of %d, sender %d", n, len(fl.set), len(all))
		}
	})
}

package icmprate

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func addr(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}) }

func TestGlobal(t *testing.T) {
	l := New(Config{Rate: 1000, Burst: 50, DestInterval: -1})
	t0 := int64(time.Hour)
	n := 0
	for i := range 200 {
		if l.Allow(addr(i), t0) {
			n++
		}
	}
	if n != 50 {
		t.Fatalf("allowed at once = %d, want the burst, 50", n)
	}
	// 1,000 per second: one more each millisecond.
	if !l.Allow(addr(1), t0+int64(time.Millisecond)) || l.Allow(addr(2), t0+int64(time.Millisecond)) {
		t.Errorf("after 1 ms: want exactly one more allowed")
	}
	// Over 10 s at 10,000 attempts a second, about 1,000 a second pass.
	n = 0
	for i := range 100000 {
		if l.Allow(addr(i), t0+int64(time.Second+time.Duration(i)*100*time.Microsecond)) {
			n++
		}
	}
	if n < 10000 || n > 10050 {
		t.Errorf("allowed over 10 s = %d, want 10,000 (+ at most the burst)", n)
	}
	a, s := l.Stats()
	if a+s != 200+2+100000 || a != uint64(50+1+n) {
		t.Errorf("Stats = %d allowed, %d suppressed; want %d, %d", a, s, 51+n, 200+2+100000-51-n)
	}
}

func TestPerDestination(t *testing.T) {
	l := New(Config{Rate: -1})
	t0 := int64(time.Hour)
	d := addr(7)
	n := 0
	for range 20 {
		if l.Allow(d, t0) {
			n++
		}
	}
	if n != DestBurst {
		t.Fatalf("allowed to one destination at once = %d, want %d", n, DestBurst)
	}
	if !l.Allow(addr(8), t0) {
		t.Errorf("another destination suppressed")
	}
	if l.Allow(d, t0+int64(999*time.Millisecond)) || !l.Allow(d, t0+int64(time.Second)) {
		t.Errorf("want the next message to %v after 1 s, not before", d)
	}
	// After a long idle time the burst is back, no more.
	n = 0
	for range 20 {
		if l.Allow(d, t0+int64(time.Hour)) {
			n++
		}
	}
	if n != DestBurst {
		t.Errorf("after idle, allowed %d, want %d", n, DestBurst)
	}
}

func TestDefaultsAndOff(t *testing.T) {
	var nilL *Limiter
	if !nilL.Allow(addr(1), 0) {
		t.Error("nil Limiter suppressed")
	}
	l := New(Config{Rate: -1, DestInterval: -1})
	for i := range 10000 {
		if !l.Allow(addr(1), int64(i)) {
			t.Fatal("limits off, message suppressed")
		}
	}
	d := New(Config{})
	if d.globalT != int64(time.Millisecond) || d.globalTol != 49*int64(time.Millisecond) || d.destT != 1e6 {
		t.Errorf("defaults: T %d tol %d destT %d µs", d.globalT, d.globalTol, d.destT)
	}
}

// TestShared: workers share one Limiter; the CAS loop lets through exactly
// the burst, however the goroutines interleave.
func TestShared(t *testing.T) {
	l := New(Config{Rate: 1, Burst: 50, DestInterval: -1})
	t0 := int64(time.Hour)
	var n atomic.Int64
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				if l.Allow(addr(g*1000+i), t0) {
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n.Load() != 50 {
		t.Errorf("4 goroutines got %d, want the burst, 50", n.Load())
	}
	if a, s := l.Stats(); a != 50 || s != 3950 {
		t.Errorf("Stats = %d, %d, want 50, 3950", a, s)
	}
}

func TestAllowAllocs(t *testing.T) {
	l := New(Config{})
	now := int64(time.Hour)
	a := netip.MustParseAddr("2001:2::1")
	if n := testing.AllocsPerRun(1000, func() { l.Allow(a, now) }); n != 0 {
		t.Errorf("Allow allocates %v times", n)
	}
}

func BenchmarkAllow(b *testing.B) {
	l := New(Config{})
	now := int64(time.Hour)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		l.Allow(addr(i&1023), now)
	}
}

// TestShift6: an IPv6 destination's interval shrinks with its route's
// prefix length as Linux's icmpv6_xrlim_allow shrinks it (1000 ms >>
// ((128 - plen) >> 5)): a /64 gets a burst of 6, then one message per
// 250 ms; a /128 one per second.
func TestShift6(t *testing.T) {
	for _, c := range []struct {
		plen  int
		shift uint
	}{{128, 0}, {127, 0}, {96, 1}, {64, 2}, {48, 2}, {32, 3}, {0, 4}} {
		if got := Shift6(c.plen); got != c.shift {
			t.Errorf("Shift6(%d) = %d, want %d", c.plen, got, c.shift)
		}
	}
	l := New(Config{Rate: -1})
	dst := netip.MustParseAddr("2001:db8::1")
	t0 := int64(time.Hour)
	n := 0
	for range 20 {
		if l.AllowShift(dst, t0, Shift6(64)) {
			n++
		}
	}
	if n != DestBurst {
		t.Errorf("a burst to a /64 destination: %d allowed, want %d", n, DestBurst)
	}
	n = 0
	for i := range 20 {
		if l.AllowShift(dst, t0+int64(i+1)*int64(50*time.Millisecond), Shift6(64)) {
			n++
		}
	}
	if n != 4 {
		t.Errorf("one a 50 ms over a second after: %d allowed, want 4", n)
	}
}

// TestAllowGlobal: AllowGlobal spends the global bucket and no
// destination's.
func TestAllowGlobal(t *testing.T) {
	l := New(Config{Rate: 1000, Burst: 50})
	t0 := int64(time.Hour)
	n := 0
	for range 100 {
		if l.AllowGlobal(t0) {
			n++
		}
	}
	if n != 50 {
		t.Errorf("AllowGlobal: %d of 100 at once, want the burst, 50", n)
	}
	if a, s := l.Stats(); a != 50 || s != 50 {
		t.Errorf("Stats() = %d, %d, want 50, 50", a, s)
	}
}

// TestPerDestinationAcrossWrap: the per-destination limit holds the same
// after the clock passes 2^48 µs (8.9 years of uptime), where the stored
// times (48 bits) wrap, and across the wrap itself. Comparing the stored
// time with the clock had every slot look idle from then on: 100 of 100
// messages 1 ms apart allowed, where 6 are.
func TestPerDestinationAcrossWrap(t *testing.T) {
	count := func(start int64) int {
		l := New(Config{Rate: -1})
		n := 0
		for i := range 100 {
			if l.Allow(addr(7), start+int64(i)*int64(time.Millisecond)) {
				n++
			}
		}
		return n
	}
	want := count(int64(time.Hour))
	wrap := int64(1<<48) * int64(time.Microsecond)
	for _, start := range []int64{wrap + int64(10*time.Microsecond), wrap - int64(50*time.Millisecond), 3*wrap + int64(time.Hour)} {
		if got := count(start); got != want {
			t.Errorf("from %d ns: %d of 100 messages 1 ms apart allowed, want %d as from 1 h", start, got, want)
		}
	}
}

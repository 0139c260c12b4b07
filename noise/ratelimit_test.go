package noise_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/noise"
)

// TestSourceLimiter: the kernel's ratelimiter rule, 20 messages/s per
// source with a burst of 5, IPv6 per /64.
func TestSourceLimiter(t *testing.T) {
	clk := newFakeClock()
	l := noise.NewSourceLimiter(clk.Now)
	a := netip.MustParseAddr("198.18.4.1")
	for i := range noise.SourceBurst {
		if !l.Allow(a) {
			t.Fatalf("Allow #%d of a burst = false, want true", i+1)
		}
	}
	if l.Allow(a) {
		t.Errorf("Allow #%d of a burst = true, want false", noise.SourceBurst+1)
	}
	if !l.Allow(netip.MustParseAddr("198.18.4.2")) {
		t.Errorf("Allow(other source) = false, want true")
	}
	clk.Advance(time.Second / noise.SourceRate)
	if !l.Allow(a) {
		t.Errorf("Allow after %v = false, want true", time.Second/noise.SourceRate)
	}
	if l.Allow(a) {
		t.Errorf("second Allow after %v = true, want false", time.Second/noise.SourceRate)
	}
	if l.Allow(netip.MustParseAddr("::ffff:198.18.4.1")) {
		t.Errorf("Allow(IPv4-mapped form of a limited source) = true, want false")
	}

	v6 := netip.MustParseAddr("2001:db8:1:2::1")
	for range noise.SourceBurst {
		l.Allow(v6)
	}
	if l.Allow(netip.MustParseAddr("2001:db8:1:2:ffff::9")) {
		t.Errorf("Allow(same /64) = true, want false")
	}
	if !l.Allow(netip.MustParseAddr("2001:db8:1:3::1")) {
		t.Errorf("Allow(other /64) = false, want true")
	}

	// Idle sources are forgotten after a second.
	clk.Advance(2 * time.Second)
	l.Allow(a)
	if got := l.Len(); got != 1 {
		t.Errorf("Len after 2 s idle = %d, want 1", got)
	}
}

func TestSourceLimiterFull(t *testing.T) {
	clk := newFakeClock()
	l := noise.NewSourceLimiter(clk.Now)
	for i := range noise.SourceLimiterMaxEntries { // 198.18.0.0/16: exactly 1<<16 sources
		a := netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)})
		l.Allow(a)
	}
	if l.Allow(netip.MustParseAddr("198.19.0.1")) {
		t.Errorf("Allow(new source, table full) = true, want false")
	}
	clk.Advance(time.Second)
	if !l.Allow(netip.MustParseAddr("198.19.0.1")) {
		t.Errorf("Allow(new source after the sweep) = false, want true")
	}
}

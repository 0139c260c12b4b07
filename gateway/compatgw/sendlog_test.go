//go:build linux

package compatgw

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/bind"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
	"github.com/wgpio/wgpio/internal/wglog"
)

// TestFailedSendsLogLimited: with the WAN's IPv4 address removed under a
// live session, every datagram the LAN sends to site B fails in the
// bind (no_wan_address, counted), and wireguard-go logs each failed
// send: 60 datagrams sent one at a time gave 60 lines "Failed to send
// data packets", a line per packet, tens of thousands a second at line
// rate, which journald's per-service limit answers by dropping every
// line of the service. Now at most wglog.Burst lines come at once and
// one per wglog.Interval after (counted against the time the sends
// took), and a later line carries the number left out (suppressed=N).
func TestFailedSendsLogLimited(t *testing.T) {
	s, g, logs := loggedSite(t, "cfl", nil)
	if out, err := s.GwA.Run("ip", "address", "del", "198.18.1.1/24", "dev", s.WANA); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	noAddr := func() uint64 { return g.Stats().Bind.Drops[bind.DropNoWANAddress] }
	dst := netip.AddrPortFrom(twosite.HostB4, 9)
	// send sends one datagram and waits until the bind has sent or
	// dropped it (a minute bounds only the gateway stopping).
	send := func() {
		t.Helper()
		st := g.Stats().Bind
		before := st.TXPackets + st.Drops.Total()
		testenv.SendUDP(t, s.HostA, dst, 1)
		if !testenv.PollUntil(time.Minute, func() bool {
			st := g.Stats().Bind
			return st.TXPackets+st.Drops.Total() > before
		}) {
			t.Fatalf("a datagram to %v neither sent nor dropped by the bind in a minute: %+v", dst, g.Stats().Bind)
		}
	}
	// The bind follows the address's removal through netlink: sends
	// before that still leave (from an address no longer the host's).
	for noAddr() == 0 {
		send()
	}
	const failures = 60
	first, start := noAddr(), time.Now()
	for noAddr()-first < failures {
		send()
	}
	took := time.Since(start)
	failed := func() (lines int, suppressed int) {
		for _, l := range strings.Split(logs.String(), "\n") {
			if !strings.Contains(l, "Failed to send data packets") {
				continue
			}
			lines++
			if _, v, ok := strings.Cut(l, "suppressed="); ok {
				n := 0
				for _, c := range v {
					if c < '0' || c > '9' {
						break
					}
					n = 10*n + int(c-'0')
				}
				suppressed += n
			}
		}
		return lines, suppressed
	}
	lines, _ := failed()
	if most := wglog.Burst + int(took/wglog.Interval) + 1; lines > most {
		t.Fatalf("%d failed sends (no_wan_address) in %v logged in %d lines \"Failed to send data packets\", want at most %d", noAddr(), took.Round(time.Millisecond), lines, most)
	}
	// One more line comes an interval on, with the number left out.
	var suppressed int
	if !testenv.PollUntil(time.Minute, func() bool {
		send()
		lines, suppressed = failed()
		return suppressed > 0
	}) {
		t.Fatalf("no line \"Failed to send data packets\" says how many were left out (suppressed=N):\n%s", logs.String())
	}
	// Every failed send is logged or left out, whatever its reason (the
	// route's removal with the address may fail some as no_wan_route).
	if st := g.Stats().Bind; uint64(lines+suppressed) > st.Drops.Total() {
		t.Errorf("%d lines and %d suppressed, more than the %d failed sends (bind drops %v)", lines, suppressed, st.Drops.Total(), st.Drops.List())
	}
}

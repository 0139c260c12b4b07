//go:build linux

package fastgw_test

import (
	"net"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/twosite"
)

// TestFloodUnansweredTicks: a flood toward a peer that never answers (its
// gateway stopped) has its first packet wake the control plane, whose
// tick sends the initiation at once (fastpath.Engine.ControlWake), but
// the packets after it, held while the handshake is in flight, do not:
// each tick clears HandshakeNeeded while one is in flight (a held packet
// restarts the count of attempts, whitepaper §6.4 as wireguard-go
// applies it) and the next packet raises it again, so a wake on each
// raise made the control plane tick some 700 times a second (at most
// every minWakeGap, 1 ms) where one tick every TickInterval (50 ms)
// serves: there is nothing to send at once, the retries follow
// RekeyTimeout. Two seconds of 5,000 packets a second took 1,569-1,673
// ticks so; 41 with the wake on the first held packet alone.
func TestFloodUnansweredTicks(t *testing.T) {
	s := newSite(t, twosite.Config{})
	g := s.Gateway
	logOnFailure(t, g)
	s.Stock.Close() // its handshakes go unanswered
	var c *net.UDPConn
	if err := s.HostA.Do(func() (err error) {
		c, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: twosite.HostB4.AsSlice(), Port: 9})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before := g.Device().TickStats()
	const flood = 2 * time.Second
	b := make([]byte, 64)
	tk := time.NewTicker(time.Millisecond)
	defer tk.Stop()
	for end := time.Now().Add(flood); time.Now().Before(end); <-tk.C {
		for range 5 {
			if _, err := c.Write(b); err != nil {
				t.Fatal(err)
			}
		}
	}
	ticks := g.Device().TickStats().Ticks - before.Ticks
	// 40 ticks of TickInterval, those the timer heap's deadlines bring
	// (minTickGap apart at the most), and the first packet's.
	if max := uint64(3 * flood / (50 * time.Millisecond)); ticks > max {
		t.Errorf("%d ticks in %v of a flood toward an unanswered peer, want at most %d (one wake, then one tick every TickInterval)", ticks, flood, max)
	}
	if st := g.Device().Stats(); st.InitiationsSent == 0 {
		t.Errorf("no initiation sent for the flood")
	}
	t.Logf("%d ticks in %v; initiations %d", ticks, flood, g.Device().Stats().InitiationsSent)
}

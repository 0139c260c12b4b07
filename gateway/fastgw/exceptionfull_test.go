package fastgw_test

import (
	"net"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/tundev"
)

// TestFullTunnelExceptionFull: while the host's kernel refuses every
// packet handed to it through the exception TUN as a full queue (EAGAIN:
// testenv.FillTUN), a road warrior floods the Internet host through its
// full tunnel (UDP, about 5,000 datagrams a second for 2 s) and pings the
// LAN through the same worker at the same time. The worker drops each
// refused packet and counts it (exception TUN drops, reason full) instead
// of waiting for room, which a kernel that stays full never gives: every
// LAN ping is answered, and the packets the worker handed to the host
// (to_host, exception) are exactly those the TUN wrote and those it
// counted as dropped. Once the queue has room the Internet answers again.
func TestFullTunnelExceptionFull(t *testing.T) {
	r := newFullTunnelRig(t)
	pingOut(t, r.p1, "198.18.200.1")
	pingOut(t, r.p1, "198.19.1.10")
	spare, peer := topo.UniqueName("wgfx"), topo.UniqueName("wgfx")
	if out, err := r.gw.Run("ip", "link", "add", spare, "up", "type", "veth", "peer", "name", peer); err != nil {
		t.Fatalf("add a spare veth: %v\n%s", err, out)
	}
	if out, err := r.gw.Run("ip", "link", "set", peer, "up"); err != nil {
		t.Fatalf("set %s up: %v\n%s", peer, err, out)
	}
	handed := func() (n uint64) {
		for _, q := range r.g.Engine().Stats() {
			n += q.ToHost + q.Exception
		}
		return n
	}
	written := func() (tx, drops uint64, s tundev.TUNStats) {
		s, _ = r.g.ExceptionTUN()
		return s.TXPackets, r.g.ExceptionDrops(), s
	}
	empty := testenv.FillTUN(t, r.gw, r.name, spare, fastgw.ExceptionFile(r.g))
	h0 := handed()
	tx0, d0, _ := written()

	flood := make(chan int, 1)
	go func() {
		n := 0
		err := r.p1.Do(func() error {
			c, err := net.Dial("udp", "198.18.200.1:9")
			if err != nil {
				return err
			}
			defer c.Close()
			b := make([]byte, 1200)
			for start := time.Now(); time.Since(start) < 2*time.Second; time.Sleep(10 * time.Millisecond) {
				for range 50 {
					if _, err := c.Write(b); err == nil {
						n++
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
		flood <- n
	}()
	time.Sleep(200 * time.Millisecond) // the queue is full by then
	out, err := r.p1.Run("ping", "-c", "10", "-i", "0.1", "-W", "1", "198.19.1.10")
	sent := <-flood
	if err != nil {
		t.Errorf("ping the LAN through the worker while it floods a full exception TUN: %v\n%s", err, out)
	}
	if m := regexp.MustCompile(`(\d+) received`).FindStringSubmatch(out); m == nil {
		t.Errorf("ping output without a count of replies:\n%s", out)
	} else if got, _ := strconv.Atoi(m[1]); got != 10 {
		t.Errorf("LAN pings answered during the flood: %d of 10, want 10\n%s", got, out)
	}

	// The worker's count and the TUN's agree once the last packet is
	// through (the worker counts a batch after handing it on).
	var h, tx, d uint64
	var s tundev.TUNStats
	ok := testenv.PollUntil(10*time.Second, func() bool {
		h = handed() - h0
		tx, d, s = written()
		tx, d = tx-tx0, d-d0
		return h == tx+d
	})
	t.Logf("flood: %d datagrams sent by the road warrior; the worker handed %d to the host: the TUN wrote %d, dropped %d (TUN: rx %d, tx %d, drops %v); gateway drops: %s",
		sent, h, tx, d, s.RXPackets, s.TXPackets, s.Drops.List(), dropsString(r.g))
	if !ok {
		t.Errorf("handed to the host %d, want the TUN's written %d + dropped %d = %d", h, tx, d, tx+d)
	}
	if s.Drops[tundev.TUNDropFull] < 1000 {
		t.Errorf("exception TUN drops as full = %d (ExceptionDrops %d), want at least 1000 of the flood", s.Drops[tundev.TUNDropFull], r.g.ExceptionDrops())
	}

	empty()
	time.Sleep(1100 * time.Millisecond) // past the worker's cached verdict
	pingOut(t, r.p1, "198.18.200.1")
}

//go:build linux

package fastgw_test

import (
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"

	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/tundev"
)

// TestFullTunnelExceptionFull: while the host's kernel refuses every
// packet handed to it through the exception TUN as a full queue (EAGAIN:
// testenv.FillTUN), a road warrior floods the Internet host through its
// full tunnel (UDP, about 5,000 datagrams a second) and pings the LAN
// through the same worker at the same time (ten pings; the flood lasts
// until their replies are in, and the TUN counts more drops as full
// meanwhile). The worker drops each refused packet and counts it
// (exception TUN drops, reason full) instead of waiting for room, which a
// kernel that stays full never gives: every LAN ping is answered, and the packets the worker handed to the host
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

	// The flood runs until the LAN pings are done, so that every ping
	// crosses the worker while it floods a full TUN however slowly a
	// loaded machine runs them.
	stop, flood := make(chan struct{}), make(chan int, 1)
	go func() {
		n := 0
		err := r.p1.Do(func() error {
			c, err := net.Dial("udp", "198.18.200.1:9")
			if err != nil {
				return err
			}
			defer c.Close()
			b := make([]byte, 1200)
			for {
				select {
				case <-stop:
					return nil
				default:
				}
				for range 50 {
					if _, err := c.Write(b); err == nil {
						n++
					}
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
		if err != nil {
			t.Error(err)
		}
		flood <- n
	}()
	fullDrops := func() uint64 {
		_, _, s := written()
		return s.Drops[tundev.TUNDropFull]
	}
	if !testenv.PollUntil(20*time.Second, func() bool { return fullDrops() > 0 }) {
		close(stop)
		<-flood
		t.Fatalf("the flood: no exception TUN drops as full after 20 s (a worker that waits for room counts none); gateway drops: %s", dropsString(r.g))
	}
	full0 := fullDrops()
	answered, err := pingEach(r.p1, netip.MustParseAddr("198.19.1.10"), 10, 100*time.Millisecond, 20*time.Second)
	full1 := fullDrops()
	// A flood of a thousand at least, however slowly the road warrior
	// sends it on a loaded machine.
	floodOK := testenv.PollUntil(20*time.Second, func() bool { return fullDrops() >= 1000 })
	close(stop)
	sent := <-flood
	if err != nil {
		t.Fatalf("ping the LAN through the worker while it floods a full exception TUN: %v", err)
	}
	if len(answered) != 10 {
		t.Errorf("LAN pings answered during the flood, within 20 s: %d of 10 (sequence numbers %v), want 10", len(answered), answered)
	}
	if full1 == full0 {
		t.Errorf("exception TUN drops as full while the LAN pings ran: %d before and after, want more: the flood did not reach the full TUN meanwhile", full0)
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
	if !floodOK {
		t.Errorf("exception TUN drops as full = %d (ExceptionDrops %d), want at least 1000 of the flood", s.Drops[tundev.TUNDropFull], r.g.ExceptionDrops())
	}

	empty()
	time.Sleep(1100 * time.Millisecond) // past the worker's cached verdict
	pingOut(t, r.p1, "198.18.200.1")
}

// pingEach sends n ICMP echo requests from ns to dst, one every interval,
// and reads the replies until each request has one or wait has passed
// since the last was sent. It returns the sequence numbers (0 to n-1)
// answered. Unlike ping(8), it waits as long for every reply, so a reply
// that a loaded machine delays is not counted lost.
func pingEach(ns *topo.NS, dst netip.Addr, n int, interval, wait time.Duration) ([]int, error) {
	var c *icmp.PacketConn
	if err := ns.Do(func() (err error) {
		c, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0")
		return err
	}); err != nil {
		return nil, err
	}
	defer c.Close()
	id := rand.IntN(1 << 16)
	c.SetReadDeadline(time.Now().Add(time.Duration(n)*interval + wait))
	sendErr := make(chan error, 1)
	go func() {
		for seq := range n {
			m := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("wgpio exceptionfull")}}
			b, err := m.Marshal(nil)
			if err == nil {
				_, err = c.WriteTo(b, &net.IPAddr{IP: dst.AsSlice()})
			}
			if err != nil {
				sendErr <- err
				return
			}
			time.Sleep(interval)
		}
		c.SetReadDeadline(time.Now().Add(wait))
		sendErr <- nil
	}()
	var answered []int
	buf := make([]byte, 1500)
	for len(answered) < n {
		k, from, err := c.ReadFrom(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			return answered, err
		}
		m, err := icmp.ParseMessage(1, buf[:k])
		if err != nil || m.Type != ipv4.ICMPTypeEchoReply || from.String() != dst.String() {
			continue
		}
		if e, ok := m.Body.(*icmp.Echo); ok && e.ID == id && e.Seq < n && !slices.Contains(answered, e.Seq) {
			answered = append(answered, e.Seq)
		}
	}
	if err := <-sendErr; err != nil {
		return answered, err
	}
	slices.Sort(answered)
	return answered, nil
}

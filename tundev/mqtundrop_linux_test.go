package tundev

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestMultiQueueTUNWriteDrops: Write never waits and never allocates for
// a packet the kernel refuses; each is counted by reason: a queue that
// stays full (testenv.FillTUN: EAGAIN), the interface down (EIO), a packet that
// is not IP (EINVAL). The kernel takes packets again once the queue has
// room and the interface is up.
func TestMultiQueueTUNWriteDrops(t *testing.T) {
	tp := testenv.Topology(t, "md")
	ns := testenv.NS(t, tp, "a")
	var dev *MultiQueueTUN
	if err := ns.Do(func() error {
		var err error
		dev, err = OpenMultiQueueTUN("wgpmd0", 2, 1420)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if err := ns.AddAddr("wgpmd0", "198.18.78.1/24"); err != nil {
		t.Fatal(err)
	}
	veth, err := tp.NewVeth(ns, ns, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// Flows over both queues, to the TUN's own address (delivered
	// locally, to no socket: the kernel takes them).
	local := netip.MustParseAddr("198.18.78.1")
	var pkts [][]byte
	for i := range 8 {
		pkts = append(pkts, udp4(netip.AddrFrom4([4]byte{198, 18, 78, byte(10 + i)}), local))
	}
	write := func(bufs [][]byte) int {
		t.Helper()
		done := make(chan int, 1)
		go func() {
			n, err := dev.Write(bufs, 0)
			if err != nil {
				t.Errorf("Write = %d, %v; want no error", n, err)
			}
			done <- n
		}()
		select {
		case n := <-done:
			return n
		case <-time.After(5 * time.Second):
			t.Fatal("Write waited 5 s for a refusing kernel")
			return 0
		}
	}
	want := TUNStats{}
	check := func(when string) {
		t.Helper()
		if got := dev.Counters(); got != want {
			t.Fatalf("%s: Counters = %+v, want %+v", when, got, want)
		}
	}
	if n := write(pkts); n != len(pkts) {
		t.Fatalf("Write = %d, want %d", n, len(pkts))
	}
	want.TXPackets += uint64(len(pkts))
	check("queue with room, interface up")

	notIP := []byte{0x00, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}
	if n := write([][]byte{notIP, pkts[0]}); n != 1 {
		t.Fatalf("Write(not IP, IPv4) = %d, want 1", n)
	}
	want.TXPackets++
	want.Drops[TUNDropMalformed]++
	check("a packet that is not IP")

	empty := testenv.FillTUN(t, ns, "wgpmd0", veth.A, dev.File())
	// The first packets of each queue are held (one goes out at once,
	// in tbf's burst); from then on the queue stays full.
	for i := 0; ; i++ {
		n := write(pkts)
		want.TXPackets += uint64(n)
		want.Drops[TUNDropFull] += uint64(len(pkts) - n)
		if n == 0 {
			break
		}
		if i == 10 {
			t.Fatalf("the kernel still takes %d of %d packets after 10 writes, want 0", n, len(pkts))
		}
	}
	check("filling the TUN")
	if n := write(pkts); n != 0 {
		t.Fatalf("Write to a full TUN = %d, want 0", n)
	}
	want.Drops[TUNDropFull] += uint64(len(pkts))
	check("full TUN")
	one := pkts[:1]
	if a := testing.AllocsPerRun(100, func() { dev.Write(one, 0) }); a != 0 {
		t.Errorf("Write to a full TUN: %v allocations a call, want 0", a)
	}
	want.Drops[TUNDropFull] += 101 // AllocsPerRun's warm-up call too
	check("full TUN, AllocsPerRun")
	empty()
	if n := write(pkts); n != len(pkts) {
		t.Fatalf("Write after the queue emptied = %d, want %d", n, len(pkts))
	}
	want.TXPackets += uint64(len(pkts))
	check("queue emptied")

	if _, err := ns.Run("ip", "link", "set", "wgpmd0", "down"); err != nil {
		t.Fatal(err)
	}
	if n := write(pkts); n != 0 {
		t.Fatalf("Write to a down TUN = %d, want 0", n)
	}
	want.Drops[TUNDropDown] += uint64(len(pkts))
	check("interface down")
	if a := testing.AllocsPerRun(100, func() { dev.Write(one, 0) }); a != 0 {
		t.Errorf("Write to a down TUN: %v allocations a call, want 0", a)
	}
	want.Drops[TUNDropDown] += 101
	check("interface down, AllocsPerRun")

	if err := ns.LinkUp("wgpmd0"); err != nil { // the IPv4 address stays
		t.Fatal(err)
	}
	if n := write(pkts); n != len(pkts) {
		t.Fatalf("Write after up = %d, want %d", n, len(pkts))
	}
	want.TXPackets += uint64(len(pkts))
	check("up again")
	if a := testing.AllocsPerRun(100, func() { dev.Write(one, 0) }); a != 0 {
		t.Errorf("Write: %v allocations a call, want 0", a)
	}

	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := dev.Write(pkts, 0); n != 0 || err == nil {
		t.Errorf("Write after Close = %d, %v; want 0 and an error", n, err)
	}
}

// TestMultiQueueTUNKernelQueueFull: what the kernel drops on its way into
// the TUN while the reader is behind (here: Read never called, so the
// reader goroutines stop once their batches are full, and the TUN's
// queue, 500 packets, fills) is in Stats as kernel_queue_full: the
// interface's TX drops, as the kernel counts them.
func TestMultiQueueTUNKernelQueueFull(t *testing.T) {
	tp := testenv.Topology(t, "mk")
	ns := testenv.NS(t, tp, "a")
	var dev *MultiQueueTUN
	if err := ns.Do(func() error {
		var err error
		dev, err = OpenMultiQueueTUN("wgpmk0", 1, 1420)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if err := ns.AddAddr("wgpmk0", "198.18.79.1/24"); err != nil {
		t.Fatal(err)
	}
	const sent = 3000 // past the readers' 4 batches of 64 and the queue's 500
	testenv.SendUDP(t, ns, netip.MustParseAddrPort("198.18.79.2:9"), sent)
	var got, kernel uint64
	ok := testenv.PollUntil(5*time.Second, func() bool {
		got = dev.Stats().Drops[TUNDropKernelQueueFull]
		l, err := ns.Handle().LinkByName("wgpmk0")
		if err != nil {
			t.Fatal(err)
		}
		kernel = l.Attrs().Statistics.TxDropped
		return got > 0 && got == kernel
	})
	if !ok || got > sent {
		t.Fatalf("Stats kernel_queue_full = %d, the interface's TX drops %d, after %d datagrams routed into a TUN nobody reads; want them equal, above 0 and at most %d", got, kernel, sent, sent)
	}
	t.Logf("%d of %d datagrams dropped by the kernel at the TUN's queue", got, sent)
}

// TestMultiQueueTUNClosedCounted: packets the kernel sent into the TUN
// that no Read took before Close are counted (closed); they were lost
// uncounted.
func TestMultiQueueTUNClosedCounted(t *testing.T) {
	tp := testenv.Topology(t, "mc")
	ns := testenv.NS(t, tp, "a")
	var dev *MultiQueueTUN
	if err := ns.Do(func() error {
		var err error
		dev, err = OpenMultiQueueTUN("wgpmc0", 2, 1420)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if err := ns.AddAddr("wgpmc0", "198.18.79.1/24"); err != nil {
		t.Fatal(err)
	}
	const sent = 5
	if err := ns.Do(func() error {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(198, 18, 79, 1)})
		if err != nil {
			return err
		}
		defer c.Close()
		for range sent {
			if _, err := c.WriteToUDP([]byte("x"), &net.UDPAddr{IP: net.IPv4(198, 18, 79, 2), Port: 7}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The readers take them from the kernel (batches wait for Read): the
	// interface's TX counter counts what a reader read (tun_put_user).
	read := func() uint64 {
		var n uint64
		if err := ns.Do(func() error {
			l, err := netlink.LinkByName("wgpmc0")
			if err == nil {
				n = l.Attrs().Statistics.TxPackets
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	deadline := time.Now().Add(5 * time.Second)
	for read() < sent && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	taken := read()
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	// (The host's IPv6 router solicitations may come too: at least.)
	if s := dev.Counters(); s.Drops[TUNDropClosed] < max(taken, sent) || s.RXPackets != 0 {
		t.Errorf("closed %d, none returned by Read (%d): want every packet the readers took, %d, and at least the %d sent",
			s.Drops[TUNDropClosed], s.RXPackets, taken, sent)
	}
}

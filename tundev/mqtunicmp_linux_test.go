package tundev

import (
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/internal/icmprate"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// icmpCatcher is a raw ICMP or ICMPv6 socket of a namespace, for reading
// the errors a host receives.
type icmpCatcher struct{ fd int }

func newICMPCatcher(t *testing.T, ns *topo.NS, family int) *icmpCatcher {
	t.Helper()
	proto := unix.IPPROTO_ICMP
	if family == unix.AF_INET6 {
		proto = unix.IPPROTO_ICMPV6
	}
	c := &icmpCatcher{}
	if err := ns.Do(func() (err error) {
		c.fd, err = unix.Socket(family, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(c.fd) })
	tv := unix.Timeval{Usec: 300_000}
	if err := unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	return c
}

// errors returns the source, type and code of the ICMP errors (types 1-4
// for ICMPv6, 3, 11 and 12 for ICMP) that c reads: it waits for want of
// them, then reads on until none comes for 300 ms, so that more than want
// are seen. A minute bounds only errors that never come: they are sent
// from the TUN's reader goroutine and cross a veth, which a loaded
// machine may hold up for longer than 300 ms.
func (c *icmpCatcher) errors(want int) (got []string) {
	b := make([]byte, 2048)
	end := time.Now().Add(time.Minute)
	for {
		n, from, err := unix.Recvfrom(c.fd, b, 0)
		if err == unix.EAGAIN || err == unix.EINTR {
			if len(got) < want && time.Now().Before(end) {
				continue
			}
			return got
		}
		if err != nil {
			return got
		}
		var src netip.Addr
		m := b[:n]
		switch a := from.(type) {
		case *unix.SockaddrInet4:
			src, m = netip.AddrFrom4(a.Addr), m[int(m[0]&0xf)*4:] // a raw ICMP socket reads the IP header
			if m[0] != 3 && m[0] != 11 && m[0] != 12 {
				continue
			}
		case *unix.SockaddrInet6:
			src = netip.AddrFrom16(a.Addr)
			if m[0] < 1 || m[0] > 4 {
				continue
			}
		}
		got = append(got, src.String()+" "+string(rune('0'+m[0]))+"/"+string(rune('0'+m[1])))
	}
}

// TestMultiQueueTUNAnswerNoRoute: on a gateway namespace whose kernel
// routes a removed peer's prefix into the TUN, a LAN host's packets to it
// are dropped by Read as no_route and answered with host unreachable /
// address unreachable from the gateway's LAN address (the kernel's choice,
// by its route back), a burst of 6 per destination (Linux's limits), the
// rest counted as suppressed; Read allocates nothing for an answer.
func TestMultiQueueTUNAnswerNoRoute(t *testing.T) {
	tp := testenv.Topology(t, "mu")
	gw, host := testenv.NS(t, tp, "g"), testenv.NS(t, tp, "h")
	var dev *MultiQueueTUN
	if err := gw.Do(func() error {
		var err error
		if dev, err = OpenMultiQueueTUN("wgpmu0", 1, 1420); err != nil {
			return err
		}
		return dev.AnswerNoRoute(icmprate.Config{DestInterval: burstOnly})
	}); err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	dev.SetAllowed([]netip.Prefix{netip.MustParsePrefix("198.18.82.0/24")})
	veth, err := tp.NewVeth(gw, host, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		ns             *topo.NS
		dev, cidr, via string
	}{
		{gw, veth.A, "198.18.81.1/24", ""}, {gw, veth.A, "2001:2:0:81::1/64", ""},
		{host, veth.B, "198.18.81.2/24", "198.18.81.1"}, {host, veth.B, "2001:2:0:81::2/64", "2001:2:0:81::1"},
	} {
		if err := s.ns.AddAddr(s.dev, s.cidr); err != nil {
			t.Fatal(err)
		}
		if s.via != "" {
			if err := s.ns.AddRoute("default", s.via, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := gw.Forwarding(); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"198.18.80.0/24", "2001:2:0:80::/64"} {
		if err := gw.AddRoute(r, "", "wgpmu0"); err != nil {
			t.Fatal(err)
		}
	}
	go func() { // wireguard-go's TUN reader
		bufs, sizes := [][]byte{make([]byte, 2048)}, []int{0}
		for {
			if _, err := dev.Read(bufs, sizes, 0); err != nil {
				return
			}
		}
	}()
	// The host's neighbour entries for the gateway first: a burst that
	// waited for them would leave by the time the kernel has them.
	for _, a := range []string{"198.18.81.1", "2001:2:0:81::1"} {
		if err := host.Ping(netip.MustParseAddr(a), 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	c4, c6 := newICMPCatcher(t, host, unix.AF_INET), newICMPCatcher(t, host, unix.AF_INET6)
	const n = 10
	testenv.SendUDP(t, host, netip.MustParseAddrPort("198.18.80.7:9"), n)
	testenv.SendUDP(t, host, netip.MustParseAddrPort("[2001:2:0:80::7]:9"), n)
	if got := c4.errors(icmprate.DestBurst); len(got) != icmprate.DestBurst || got[0] != "198.18.81.1 3/1" {
		t.Errorf("host received ICMP errors %q, want %d of 198.18.81.1 3/1", got, icmprate.DestBurst)
	}
	if got := c6.errors(icmprate.DestBurst); len(got) != icmprate.DestBurst || got[0] != "2001:2:0:81::1 1/3" {
		t.Errorf("host received ICMPv6 errors %q, want %d of 2001:2:0:81::1 1/3", got, icmprate.DestBurst)
	}
	// The reader may still be on the last packets: wait until each is
	// counted as dropped and as answered or suppressed (a minute bounds
	// only a reader that stopped).
	var s TUNStats
	testenv.PollUntil(time.Minute, func() bool {
		s = dev.Counters()
		return s.Drops[TUNDropNoRoute] >= 2*n && s.ICMPErrors+s.ICMPSuppressed >= 2*n
	})
	if s.Drops[TUNDropNoRoute] != 2*n || s.ICMPErrors != 2*icmprate.DestBurst || s.ICMPSuppressed != 2*(n-icmprate.DestBurst) || s.ICMPSendErrors != 0 {
		t.Errorf("Counters = %+v, want %d no_route, %d ICMP errors, %d suppressed", s, 2*n, 2*icmprate.DestBurst, 2*(n-icmprate.DestBurst))
	}

	// Read, answering every no_route drop (no limits), allocates nothing.
	m := memTUN()
	if err := gw.Do(func() error { return m.AnswerNoRoute(icmprate.Config{Rate: -1, DestInterval: -1}) }); err != nil {
		t.Fatal(err)
	}
	defer m.icmp.Load().close()
	m.SetAllowed([]netip.Prefix{})
	hostIP4 := netip.MustParseAddr("198.18.81.2")
	m.batches <- batchOf(udp4(hostIP4, netip.MustParseAddr("198.18.80.8")), udp4(hostIP4, netip.MustParseAddr("198.18.80.9")))
	bufs, sizes := [][]byte{make([]byte, 2048)}, []int{0}
	m.Read(bufs, sizes, 0)
	allocs := testing.AllocsPerRun(100, func() {
		b := <-m.free
		b.next = 0
		m.batches <- b
		m.Read(bufs, sizes, 0)
	})
	if allocs != 0 {
		t.Errorf("Read answering no_route: %v allocations a call, want 0", allocs)
	}
	if s := m.Counters(); s.ICMPErrors != 2*102 || s.ICMPSendErrors != 0 {
		t.Errorf("Counters = %+v, want %d ICMP errors sent", s, 2*102)
	}
	if got := c4.errors(2 * 102); len(got) != 2*102 {
		t.Errorf("host received %d ICMP errors, want %d", len(got), 2*102)
	}
}

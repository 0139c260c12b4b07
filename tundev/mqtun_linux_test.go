package tundev

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/ipv4"

	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/testenv"
)

// TestMultiQueueTUNEcho opens a 2-queue TUN in a namespace, sends UDP from
// kernel sockets toward addresses routed into it, reads the packets with
// Read, and writes back swapped replies that the kernel sockets receive.
func TestMultiQueueTUNEcho(t *testing.T) {
	tp := testenv.Topology(t, "mq")
	ns := testenv.NS(t, tp, "a")
	var dev *MultiQueueTUN
	if err := ns.Do(func() error {
		var err error
		dev, err = OpenMultiQueueTUN("wgpmq0", 2, 1420)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if ev := <-dev.Events(); ev != 0x1 { // tun.EventUp
		t.Fatalf("first event = %v, want EventUp", ev)
	}
	if err := ns.AddAddr("wgpmq0", "198.18.77.1/24"); err != nil {
		t.Fatal(err)
	}
	const flows = 16
	conns := make([]*net.UDPConn, flows)
	if err := ns.Do(func() error {
		for i := range conns {
			c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(198, 18, 77, 1)})
			if err != nil {
				return err
			}
			conns[i] = c
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range conns {
		defer c.Close()
		if _, err := c.WriteToUDP([]byte("ping"), &net.UDPAddr{IP: net.IPv4(198, 18, 77, 2), Port: 7}); err != nil {
			t.Fatal(err)
		}
	}
	bufs := make([][]byte, dev.BatchSize())
	for i := range bufs {
		bufs[i] = make([]byte, 2000)
	}
	sizes := make([]int, len(bufs))
	const off = 16
	var got [][]byte
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < flows && time.Now().Before(deadline) {
		n, err := dev.Read(bufs, sizes, off)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			var p header.Packet
			pkt := bufs[i][off : off+sizes[i]]
			if header.ParseIP(pkt, &p) != header.OK || p.Proto != header.ProtoUDP || p.DstPort != 7 {
				continue // e.g. IPv6 router solicitations
			}
			got = append(got, append([]byte(nil), pkt...))
		}
	}
	if len(got) != flows {
		t.Fatalf("read %d UDP packets, want %d", len(got), flows)
	}
	// Echo: swap addresses and ports, fix checksums.
	var out [][]byte
	for _, pkt := range got {
		h, _ := ipv4.ParseHeader(pkt)
		reply := make([]byte, off+len(pkt))
		copy(reply[off:], pkt)
		r := reply[off:]
		copy(r[12:16], h.Dst.To4())
		copy(r[16:20], h.Src.To4())
		u := header.UDP(r[h.Len:])
		sp, dp := u.SrcPort(), u.DstPort()
		header.PutUDP(u, dp, sp, u.Length()-header.UDPLen)
		src, _ := netip.AddrFromSlice(h.Dst.To4())
		dst, _ := netip.AddrFromSlice(h.Src.To4())
		u.SetChecksum(header.PseudoHeaderChecksum(header.ProtoUDP, src, dst, u.Length()))
		header.IPv4(r).SetChecksum()
		out = append(out, reply)
	}
	if n, err := dev.Write(out, off); err != nil || n != len(out) {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(out))
	}
	buf := make([]byte, 100)
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		n, from, err := c.ReadFromUDP(buf)
		if err != nil {
			t.Fatalf("flow %d: no echo: %v", i, err)
		}
		if string(buf[:n]) != "ping" || from.Port != 7 {
			t.Errorf("flow %d: echo %q from %v, want \"ping\" from port 7", i, buf[:n], from)
		}
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := dev.Read(bufs, sizes, off); err == nil {
		t.Error("Read after Close returned no error")
	}
}

// TestMultiQueueTUNNameTaken: a name another kind of interface holds (the
// gateway named after its WAN, or "lo") is refused with an error that says
// so, not the kernel's bare EINVAL.
func TestMultiQueueTUNNameTaken(t *testing.T) {
	tp := testenv.Topology(t, "mn")
	ns := testenv.NS(t, tp, "a")
	err := ns.Do(func() error {
		dev, err := OpenMultiQueueTUN("lo", 1, 1420)
		if err == nil {
			dev.Close()
		}
		return err
	})
	const want = "an interface named lo exists and is not a multi-queue TUN"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("OpenMultiQueueTUN(lo) = %v, want an error containing %q", err, want)
	}
}

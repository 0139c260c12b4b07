package tundev

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestOffloadTUNWriteBatch: WriteBatch hands a batch of one UDP flow to
// the kernel coalesced (fewer kernel packets, the interface's RX
// packets, than packets), allocates nothing, never waits, and counts
// each packet the kernel refuses by reason: a queue that stays full
// (testenv.FillTUN: EAGAIN), the interface down (EIO), a packet that is
// not IP (EINVAL), an empty one. The kernel takes packets again once the
// queue has room and the interface is up.
func TestOffloadTUNWriteBatch(t *testing.T) {
	tp := testenv.Topology(t, "ob")
	ns := testenv.NS(t, tp, "a")
	const name = "wgpob0"
	dev := openOffloadTUN(t, ns, name, 2)
	if err := ns.AddAddr(name, "198.18.78.1/24"); err != nil {
		t.Fatal(err)
	}
	veth, err := tp.NewVeth(ns, ns, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// To the TUN's own address (delivered locally, to no socket: the
	// kernel takes them): eight flows, and one flow of 32 datagrams.
	local := netip.MustParseAddr("198.18.78.1")
	var pkts, flow [][]byte
	for i := range 8 {
		pkts = append(pkts, udp4(netip.AddrFrom4([4]byte{198, 18, 78, byte(10 + i)}), local))
	}
	// Their IPv4 identifications one after another, as a sender's
	// that Linux's GRO coalesces (offloadgro_linux.go).
	for i := range 32 {
		p := udp4(netip.MustParseAddr("198.18.78.9"), local)
		binary.BigEndian.PutUint16(p[4:6], uint16(1000+i))
		header.IPv4(p).SetChecksum()
		flow = append(flow, p)
	}
	kernelRX := func() uint64 {
		t.Helper()
		l, err := ns.Handle().LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		return l.Attrs().Statistics.RxPackets
	}
	write := func(writer int, bufs [][]byte) int {
		t.Helper()
		done := make(chan int, 1)
		go func() { done <- dev.WriteBatch(writer, bufs) }()
		select {
		case n := <-done:
			return n
		case <-time.After(5 * time.Second):
			t.Fatal("WriteBatch waited 5 s for a refusing kernel")
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
	if n := write(0, pkts); n != len(pkts) {
		t.Fatalf("WriteBatch = %d, want %d", n, len(pkts))
	}
	want.TXPackets += uint64(len(pkts))
	check("queue with room, interface up")

	rx := kernelRX()
	if n := write(1, flow); n != len(flow) {
		t.Fatalf("WriteBatch(one flow) = %d, want %d", n, len(flow))
	}
	want.TXPackets += uint64(len(flow))
	check("one flow")
	if k := kernelRX() - rx; k >= uint64(len(flow)) {
		t.Errorf("a batch of %d datagrams of one flow reached the kernel as %d packets, want fewer (coalesced)", len(flow), k)
	} else {
		t.Logf("a batch of %d datagrams of one flow reached the kernel as %d packets", len(flow), k)
	}
	if a := testing.AllocsPerRun(100, func() { dev.WriteBatch(1, flow) }); a != 0 {
		t.Errorf("WriteBatch: %v allocations a call, want 0", a)
	}
	want.TXPackets += 101 * uint64(len(flow)) // AllocsPerRun's warm-up call too
	check("AllocsPerRun")

	notIP := []byte{0x00, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}
	if n := write(0, [][]byte{notIP, pkts[0], nil}); n != 1 {
		t.Fatalf("WriteBatch(not IP, IPv4, empty) = %d, want 1", n)
	}
	want.TXPackets++
	want.Drops[TUNDropMalformed] += 2
	check("a packet that is not IP, an empty one")

	empty := testenv.FillTUN(t, ns, name, veth.A, dev.File())
	// The first packets are held (one goes out at once, in tbf's
	// burst); from then on the queue stays full.
	for i := 0; ; i++ {
		n := write(0, pkts)
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
	if n := write(1, flow); n != 0 {
		t.Fatalf("WriteBatch(one flow) to a full TUN = %d, want 0", n)
	}
	want.Drops[TUNDropFull] += uint64(len(flow))
	check("full TUN")
	empty()
	if n := write(0, pkts); n != len(pkts) {
		t.Fatalf("WriteBatch after the queue emptied = %d, want %d", n, len(pkts))
	}
	want.TXPackets += uint64(len(pkts))
	check("queue emptied")

	if _, err := ns.Run("ip", "link", "set", name, "down"); err != nil {
		t.Fatal(err)
	}
	if n := write(1, flow); n != 0 {
		t.Fatalf("WriteBatch to a down TUN = %d, want 0", n)
	}
	want.Drops[TUNDropDown] += uint64(len(flow))
	check("interface down")
	if err := ns.LinkUp(name); err != nil {
		t.Fatal(err)
	}
	if n := write(0, pkts); n != len(pkts) {
		t.Fatalf("WriteBatch after up = %d, want %d", n, len(pkts))
	}
	want.TXPackets += uint64(len(pkts))
	check("up again")
}

// TestOffloadTUNRead: what the kernel routes into the interface is read
// (and counted), and Read returns os.ErrClosed once the TUN is closed.
func TestOffloadTUNRead(t *testing.T) {
	tp := testenv.Topology(t, "or")
	ns := testenv.NS(t, tp, "a")
	const name = "wgpor0"
	dev := openOffloadTUN(t, ns, name, 1)
	if err := ns.AddAddr(name, "198.18.81.1/24"); err != nil {
		t.Fatal(err)
	}
	testenv.SendUDP(t, ns, netip.MustParseAddrPort("198.18.81.2:9"), 3)
	bufs := make([][]byte, dev.BatchSize())
	for i := range bufs {
		bufs[i] = make([]byte, 65535)
	}
	sizes := make([]int, len(bufs))
	got := 0
	for got < 3 {
		n, err := dev.Read(bufs, sizes, 0)
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		for i := range n {
			if p := bufs[i][:sizes[i]]; len(p) < 20 || p[0]>>4 != 4 || p[9] != 17 {
				continue // the kernel's own (none for IPv4 here, but keep to UDP)
			}
			got++
		}
	}
	if s := dev.Counters(); s.RXPackets < 3 {
		t.Errorf("RXPackets = %d after 3 datagrams read, want at least 3", s.RXPackets)
	}
	done := make(chan error, 1)
	go func() {
		_, err := dev.Read(bufs, sizes, 0)
		done <- err
	}()
	dev.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("Read at Close: %v, want os.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read still blocked 5 s after Close")
	}
}

// TestOffloadTUNGSOMaxSegs: the interface takes no GSO packet of more
// segments than one Read returns (its gso_max_segs at most BatchSize),
// so that the kernel segments a larger one in software before handing
// it over (netif_skb_features) instead of Read dropping it whole as
// too_big. At the default (65,535) a forwarded TCP packet a NIC's GRO
// built from segments of an MSS under about 512, or the host's own TCP
// at such an MSS, was lost every time and its flow stalled.
func TestOffloadTUNGSOMaxSegs(t *testing.T) {
	tp := testenv.Topology(t, "os")
	ns := testenv.NS(t, tp, "a")
	const name = "wgpos0"
	dev := openOffloadTUN(t, ns, name, 1)
	l, err := ns.Handle().LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Attrs().GSOMaxSegs; got == 0 || int(got) > dev.BatchSize() {
		t.Errorf("gso_max_segs %d, want 1 to %d (Read's batch)", got, dev.BatchSize())
	}
}

// TestOffloadTUNReadUDPChecksumAllOnes: a UDP datagram the host sends into
// the interface whose checksum computes to "all ones" leaves Read with
// 0xffff in its checksum field, as RFC 768 sends it, over IPv4 and IPv6.
// The kernel leaves the checksum to the device (the interface has the
// checksum offload), and wireguard-go's tun, completing it, wrote 0: "no
// checksum" for IPv4, and for IPv6 a datagram the receiver drops (RFC
// 8200 §8.1), one in 65,536 of the host's UDP through the exception TUN.
func TestOffloadTUNReadUDPChecksumAllOnes(t *testing.T) {
	tp := testenv.Topology(t, "oc")
	ns := testenv.NS(t, tp, "a")
	const name = "wgpoc0"
	dev := openOffloadTUN(t, ns, name, 1)
	if err := ns.AddAddr(name, "198.18.82.1/24"); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.Run("ip", "-6", "addr", "add", "2001:2:0:82::1/64", "dev", name, "nodad"); err != nil {
		t.Fatal(err)
	}
	bufs := make([][]byte, dev.BatchSize())
	for i := range bufs {
		bufs[i] = make([]byte, 65535)
	}
	sizes := make([]int, len(bufs))
	for _, c := range []struct{ src, dst netip.AddrPort }{
		{netip.MustParseAddrPort("198.18.82.1:4000"), netip.MustParseAddrPort("198.18.82.2:9")},
		{netip.MustParseAddrPort("[2001:2:0:82::1]:4000"), netip.MustParseAddrPort("[2001:2:0:82::2]:9")},
	} {
		// A payload whose last word makes the sum over the datagram
		// (its checksum field 0) 0xffff: the checksum computes to 0.
		payload := make([]byte, 32)
		copy(payload, "all ones")
		u := make([]byte, header.UDPLen+len(payload))
		binary.BigEndian.PutUint16(u[0:2], c.src.Port())
		binary.BigEndian.PutUint16(u[2:4], c.dst.Port())
		binary.BigEndian.PutUint16(u[4:6], uint16(len(u)))
		copy(u[header.UDPLen:], payload)
		s := header.FoldChecksum(header.Checksum(u, header.PseudoHeaderChecksum(header.ProtoUDP, c.src.Addr(), c.dst.Addr(), len(u))))
		binary.BigEndian.PutUint16(payload[len(payload)-2:], 0xffff-s)
		var conn *net.UDPConn
		if err := ns.Do(func() (err error) {
			conn, err = net.DialUDP("udp", net.UDPAddrFromAddrPort(c.src), net.UDPAddrFromAddrPort(c.dst))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		_, err := conn.Write(payload)
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		for got == nil {
			n, err := dev.Read(bufs, sizes, 0)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			for i := range n {
				p := bufs[i][:sizes[i]]
				if bytes.HasSuffix(p, payload) && bytes.Contains(p, []byte("all ones")) {
					got = p
				}
			}
		}
		d := got[len(got)-len(u):]
		if ck := binary.BigEndian.Uint16(d[6:8]); ck != 0xffff {
			t.Errorf("%v: UDP checksum %#04x, want 0xffff (a computed 0, RFC 768)", c.dst, ck)
		}
		if v := header.FoldChecksum(header.Checksum(d, header.PseudoHeaderChecksum(header.ProtoUDP, c.src.Addr(), c.dst.Addr(), len(d)))); v != 0xffff {
			t.Errorf("%v: the datagram does not verify (sum %#04x)", c.dst, v)
		}
	}
}

// openOffloadTUN opens an OffloadTUN of writers writers named name in ns
// (MTU 1420), closed at the test's end.
func openOffloadTUN(t *testing.T, ns *topo.NS, name string, writers int) *OffloadTUN {
	t.Helper()
	var dev *OffloadTUN
	if err := ns.Do(func() error {
		var err error
		dev, err = OpenOffloadTUN(name, writers, 1420)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

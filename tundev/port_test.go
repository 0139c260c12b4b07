package tundev

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/tun"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/testenv"
)

var (
	lanIP   = netip.MustParseAddr("198.18.11.1")
	hostIP  = netip.MustParseAddr("198.18.11.2")
	lanIP6  = netip.MustParseAddr("2001:2:0:11::1")
	hostIP6 = netip.MustParseAddr("2001:2:0:11::2")
	farIP   = netip.MustParseAddr("198.18.12.5") // behind the host, a router
	macGW   = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0a}
	macHost = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0b}
)

type portRig struct {
	a, b *memport.Port
	dev  *PortDevice
	tbl  *arp.Table
}

func newPortRig(t testing.TB, queues int, mod func(*PortConfig)) *portRig {
	t.Helper()
	a, b, err := memport.NewPair(memport.Config{Queues: queues, MACA: macGW, MACB: macHost, RingSize: 2048})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	routes, err := arp.NewStaticRoutes([]arp.Route{
		{Prefix: netip.MustParsePrefix("198.18.11.0/24")},
		{Prefix: netip.MustParsePrefix("2001:2:0:11::/64")},
		{Prefix: netip.MustParsePrefix("198.18.12.0/24"), Gateway: hostIP},
	})
	if err != nil {
		t.Fatal(err)
	}
	tbl := arp.NewTable(arp.Config{})
	tbl.Set(hostIP, arp.MAC(macHost), arp.StateReachable)
	tbl.Set(hostIP6, arp.MAC(macHost), arp.StateReachable)
	cfg := PortConfig{Port: a, Name: "lan0", MTU: 1420, Routes: routes, Neighbours: tbl}
	if mod != nil {
		mod(&cfg)
	}
	dev, err := NewPortDevice(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return &portRig{a: a, b: b, dev: dev, tbl: tbl}
}

// ipPacket builds an IPv4 or IPv6 packet with a UDP header and payload,
// written out by hand (RFC 791, RFC 8200, RFC 768; checksums left 0, the
// device does not look at them).
func ipPacket(src, dst netip.Addr, payload []byte) []byte {
	u := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(u[4:], uint16(8+len(payload)))
	u = append(u, payload...)
	if src.Is4() {
		ip := []byte{0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0}
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(u)))
		ip = append(append(ip, src.AsSlice()...), dst.AsSlice()...)
		header.IPv4(ip).SetChecksum()
		return append(ip, u...)
	}
	ip := []byte{0x60, 0, 0, 0, 0, 0, 17, 64}
	binary.BigEndian.PutUint16(ip[4:], uint16(len(u)))
	ip = append(append(ip, src.AsSlice()...), dst.AsSlice()...)
	return append(ip, u...)
}

func ethFrame(dst, src net.HardwareAddr, et uint16, body []byte) []byte {
	f := append(append([]byte{}, dst...), src...)
	f = binary.BigEndian.AppendUint16(f, et)
	return append(f, body...)
}

func (r *portRig) inject(t testing.TB, q int, frames ...[]byte) {
	t.Helper()
	tx := r.b.Queue(q).TX()
	fs := make([]dataplane.Frame, len(frames))
	if n := tx.Alloc(fs); n != len(fs) {
		t.Fatalf("Alloc = %d", n)
	}
	for i, b := range frames {
		fs[i].SetLen(len(b))
		copy(fs[i].Data(), b)
	}
	if n := tx.Transmit(fs); n != len(fs) {
		t.Fatalf("Transmit = %d", n)
	}
}

func (r *portRig) collect(want int) [][]byte {
	var out [][]byte
	fs := make([]dataplane.Frame, 256)
	for deadline := time.Now().Add(time.Second); len(out) < want && time.Now().Before(deadline); {
		for q := range r.b.NumQueues() {
			rx := r.b.Queue(q).RX()
			n := rx.Receive(fs)
			for i := range n {
				out = append(out, append([]byte(nil), fs[i].Data()...))
			}
			rx.Free(fs[:n])
		}
		time.Sleep(time.Millisecond)
	}
	return out
}

func TestPortDeviceBasics(t *testing.T) {
	r := newPortRig(t, 1, nil)
	if ev := <-r.dev.Events(); ev != tun.EventUp {
		t.Errorf("first event = %v, want EventUp", ev)
	}
	if mtu, err := r.dev.MTU(); mtu != 1420 || err != nil {
		t.Errorf("MTU() = %d, %v; want 1420, nil", mtu, err)
	}
	if n, err := r.dev.Name(); n != "lan0" || err != nil {
		t.Errorf("Name() = %q, %v; want lan0, nil", n, err)
	}
	if r.dev.BatchSize() != PortBatchSize || r.dev.File() != nil {
		t.Errorf("BatchSize() = %d, File() = %v; want %d, nil", r.dev.BatchSize(), r.dev.File(), PortBatchSize)
	}
}

// hop is a copy of the IP packet p as a router forwards it: TTL or hop
// limit − 1 (header.DecrementHop).
func hop(p []byte) []byte {
	q := bytes.Clone(p)
	header.DecrementHop(q)
	return q
}

// TestPortDeviceRead: frames on every queue come out of one Read as IP
// packets at the offset, without Ethernet header, tag or padding, their TTL
// lowered by one.
func TestPortDeviceRead(t *testing.T) {
	r := newPortRig(t, 3, nil)
	p4 := ipPacket(hostIP, farIP, []byte("v4"))
	p6 := ipPacket(hostIP6, netip.MustParseAddr("2001:2:0:12::5"), []byte("v6"))
	padded := append(ethFrame(macGW, macHost, 0x0800, ipPacket(hostIP, farIP, []byte("p"))), make([]byte, 20)...)
	// A priority tag (VID 0) is untagged for Linux; VLAN 5 is another
	// VLAN's traffic, dropped by reason.
	tagged := append(append(append([]byte{}, macGW...), macHost...), 0x81, 0x00, 0xa0, 0x00, 0x08, 0x00)
	tagged = append(tagged, p4...)
	vlan5 := append(append(append([]byte{}, macGW...), macHost...), 0x81, 0x00, 0x00, 0x05, 0x08, 0x00)
	vlan5 = append(vlan5, p4...)
	r.inject(t, 0, ethFrame(macGW, macHost, 0x0800, p4))
	r.inject(t, 1, ethFrame(macGW, macHost, 0x86dd, p6), padded)
	r.inject(t, 2, tagged, ethFrame(macGW, macHost, 0x88cc, []byte("lldp garbage")), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x08, 0x00, 0x45}, vlan5)
	const off = 16
	bufs := make([][]byte, 8)
	for i := range bufs {
		bufs[i] = make([]byte, 2000)
	}
	sizes := make([]int, len(bufs))
	var got [][]byte
	for deadline := time.Now().Add(2 * time.Second); len(got) < 4 && time.Now().Before(deadline); {
		n, err := r.dev.Read(bufs, sizes, off)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			got = append(got, append([]byte(nil), bufs[i][off:off+sizes[i]]...))
		}
	}
	want := map[string]bool{string(hop(p4)): true, string(hop(p6)): true, string(hop(ipPacket(hostIP, farIP, []byte("p")))): true}
	if len(got) != 4 {
		t.Fatalf("Read %d packets, want 4", len(got))
	}
	for i, g := range got {
		if !want[string(g)] {
			t.Errorf("packet %d = %x, not one sent", i, g)
		}
	}
	s := r.dev.Stats()
	if s.RXPackets != 4 || s.Drops[PortDropNotIP] != 1 || s.Drops[PortDropMalformed] != 1 || s.Drops[PortDropVLAN] != 1 {
		t.Errorf("Stats() = %+v, want 4 packets, 1 not IP, 1 malformed, 1 vlan", s)
	}
}

// TestPortDeviceWrite: packets get an Ethernet header to their next hop's
// MAC (on-link or through a gateway); bad ones are dropped and counted.
func TestPortDeviceWrite(t *testing.T) {
	r := newPortRig(t, 2, func(c *PortConfig) { c.ResolveWait = 20 * time.Millisecond })
	const off = 16
	pad := func(p []byte) []byte { return append(make([]byte, off), p...) }
	p4 := ipPacket(lanIP, hostIP, []byte("to host"))
	p4far := ipPacket(lanIP, farIP, []byte("via host"))
	p6 := ipPacket(lanIP6, hostIP6, []byte("six"))
	bufs := [][]byte{
		pad(p4), pad(p4far), pad(p6),
		pad(ipPacket(lanIP, netip.MustParseAddr("198.51.100.1"), nil)), // no route
		pad(ipPacket(lanIP, netip.MustParseAddr("198.18.11.99"), nil)), // no neighbour
		pad([]byte{0x50, 1, 2}),                          // not IP
		pad(ipPacket(lanIP, hostIP, make([]byte, 1600))), // above the port MTU
	}
	n, err := r.dev.Write(bufs, off)
	if n != len(bufs) || err != nil {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(bufs))
	}
	got := r.collect(3)
	want := [][]byte{ethFrame(macHost, macGW, 0x0800, hop(p4)), ethFrame(macHost, macGW, 0x0800, hop(p4far)), ethFrame(macHost, macGW, 0x86dd, hop(p6))}
	if len(got) != 3 {
		t.Fatalf("host received %d frames, want 3", len(got))
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || bytes.Equal(g, w)
		}
		if !found {
			t.Errorf("frame %x not received", w)
		}
	}
	s := r.dev.Stats()
	for _, c := range []struct {
		r    PortDropReason
		want uint64
	}{{PortDropNoRoute, 1}, {PortDropNoNeighbour, 1}, {PortDropMalformed, 1}, {PortDropTooBig, 1}} {
		if s.Drops[c.r] != c.want {
			t.Errorf("Drops[%v] = %d, want %d", c.r, s.Drops[c.r], c.want)
		}
	}
}

func TestPortDeviceOwnedARP(t *testing.T) {
	r := newPortRig(t, 1, func(c *PortConfig) {
		rsp, err := arp.NewResponder(arp.ResponderConfig{MAC: arp.MAC(macGW), Addrs: []netip.Addr{lanIP, lanIP6}, SkipDAD: true, Table: c.Neighbours})
		if err != nil {
			t.Fatal(err)
		}
		c.Responder = rsp
	})
	req := make([]byte, 60)
	n, _ := (&arp.ARP{EthDst: arp.Broadcast, EthSrc: arp.MAC(macHost), Op: arp.ARPRequest, SenderMAC: arp.MAC(macHost), SenderIP: hostIP, TargetIP: lanIP}).Marshal(req)
	r.inject(t, 0, req[:n], ethFrame(macGW, macHost, 0x0800, ipPacket(hostIP, farIP, nil)))
	bufs, sizes := [][]byte{make([]byte, 2000)}, []int{0}
	if n, err := r.dev.Read(bufs, sizes, 0); n != 1 || err != nil {
		t.Fatalf("Read = %d, %v; want 1, nil", n, err)
	}
	got := r.collect(1)
	if len(got) != 1 {
		t.Fatalf("host received %d frames, want the ARP reply", len(got))
	}
	a, rs := arp.ParseARP(got[0])
	if rs != arp.ReasonNone || a.Op != arp.ARPReply || a.SenderIP != lanIP || a.SenderMAC != arp.MAC(macGW) {
		t.Errorf("reply = %+v (%v), want %v is-at %v", a, rs, lanIP, macGW)
	}
}

func TestPortDeviceClose(t *testing.T) {
	r := newPortRig(t, 2, nil)
	<-r.dev.Events()
	errc := make(chan error, 1)
	go func() {
		_, err := r.dev.Read([][]byte{make([]byte, 100)}, []int{0}, 0)
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := r.dev.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, os.ErrClosed) {
		t.Errorf("blocked Read after Close = %v, want os.ErrClosed", err)
	}
	if _, ok := <-r.dev.Events(); ok {
		t.Error("Events not closed by Close")
	}
	if _, err := r.dev.Write([][]byte{ipPacket(lanIP, hostIP, nil)}, 0); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Write after Close = %v, want os.ErrClosed", err)
	}
}

// TestPortDeviceReadPortClosed: a Read blocked when the port is closed
// under the device (closed before it, against its contract) returns an
// error wrapping dataplane.ErrClosed; it polled the closed port, a CPU's
// worth, until the device closed.
func TestPortDeviceReadPortClosed(t *testing.T) {
	r := newPortRig(t, 2, nil)
	errc := make(chan error, 1)
	go func() {
		_, err := r.dev.Read([][]byte{make([]byte, 100)}, []int{0}, 0)
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	r.a.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, dataplane.ErrClosed) || errors.Is(err, os.ErrClosed) {
			t.Errorf("Read whose port closed = %v, want dataplane.ErrClosed (the device is open)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Read whose port closed did not return in 10 s")
	}
}

// TestPortDeviceReadNoRoom: Read given no room (no buffers or no sizes)
// returns 0 and nil at once, leaving what waits for the next call, and
// os.ErrClosed after Close. Before, it blocked for good, with or without
// packets waiting.
func TestPortDeviceReadNoRoom(t *testing.T) {
	r := newPortRig(t, 1, nil)
	p4 := ipPacket(hostIP, farIP, []byte("kept"))
	r.inject(t, 0, ethFrame(macGW, macHost, 0x0800, p4))
	bufs, sizes := [][]byte{make([]byte, 2000)}, []int{0}
	for _, c := range []struct {
		name  string
		bufs  [][]byte
		sizes []int
	}{{"no buffers", nil, sizes}, {"no sizes", bufs, nil}} {
		returned, err := testenv.ReturnsWithin(5*time.Second, func() error {
			n, err := r.dev.Read(c.bufs, c.sizes, 0)
			if err == nil && n != 0 {
				err = fmt.Errorf("n = %d", n)
			}
			return err
		})
		if !returned {
			t.Fatalf("%s: Read blocked 5 s", c.name)
		}
		if err != nil {
			t.Errorf("%s: Read = %v, want 0 and nil", c.name, err)
		}
	}
	if got := r.readAll(t, 1, 1); len(got) != 1 || !bytes.Equal(got[0], hop(p4)) {
		t.Errorf("Read after calls without room got %d packets, want the one kept", len(got))
	}
	r.dev.Close()
	if _, err := r.dev.Read(nil, nil, 0); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Read without room after Close = %v, want os.ErrClosed", err)
	}
}

func TestPortDeviceNoAllocs(t *testing.T) {
	for _, queues := range []int{1, 2} {
		r := newPortRig(t, queues, nil)
		const off = 16
		// Two flows, so that with two queues a Write uses both.
		out := [][]byte{
			append(make([]byte, off), ipPacket(lanIP, hostIP, make([]byte, 64))...),
			append(make([]byte, off), ipPacket(lanIP, hostIP, make([]byte, 64))...),
		}
		out[1][off+20] = 7 // another UDP source port
		in := ethFrame(macGW, macHost, 0x0800, ipPacket(hostIP, farIP, make([]byte, 64)))
		bufs, sizes := [][]byte{make([]byte, 2000)}, []int{0}
		fs := make([]dataplane.Frame, 4)
		txB := r.b.Queue(0).TX()
		orig := [][]byte{bytes.Clone(out[0]), bytes.Clone(out[1])}
		step := func() {
			copy(out[0], orig[0]) // Write lowered the TTL in place
			copy(out[1], orig[1])
			r.dev.Write(out, off)
			for q := range queues {
				rxB := r.b.Queue(q).RX()
				n := rxB.Receive(fs)
				rxB.Free(fs[:n])
			}
			txB.Alloc(fs[:1])
			fs[0].SetLen(len(in))
			copy(fs[0].Data(), in)
			txB.Transmit(fs[:1])
			if n, err := r.dev.Read(bufs, sizes, off); n != 1 || err != nil {
				t.Fatalf("Read = %d, %v", n, err)
			}
		}
		step()
		if a := testing.AllocsPerRun(200, step); a != 0 {
			t.Errorf("%d queues: allocs per Write + Read = %v, want 0", queues, a)
		}
	}
}

// FuzzPortTake feeds arbitrary frames to the PortDevice's receive path: no
// panic, and a frame is either returned whole-IP or counted once.
func FuzzPortTake(f *testing.F) {
	// Seeds: an IPv4 and an IPv6 packet, a tagged frame, a runt, an ARP
	// request (owned mode: answered, not returned).
	f.Add(ethFrame(macGW, macHost, 0x0800, ipPacket(hostIP, farIP, []byte("x"))))
	f.Add(ethFrame(macGW, macHost, 0x86dd, ipPacket(hostIP6, lanIP6, []byte("y"))))
	f.Add(append(append(append([]byte{}, macGW...), macHost...), 0x81, 0x00, 0, 1, 0x08, 0x00, 0x45))
	f.Add([]byte{1, 2, 3})
	req := make([]byte, 60)
	n, _ := (&arp.ARP{EthDst: arp.Broadcast, EthSrc: arp.MAC(macHost), Op: arp.ARPRequest, SenderMAC: arp.MAC(macHost), SenderIP: hostIP, TargetIP: lanIP}).Marshal(req)
	f.Add(req[:n])
	r := newPortRig(f, 1, func(c *PortConfig) {
		rsp, err := arp.NewResponder(arp.ResponderConfig{MAC: arp.MAC(macGW), Addrs: []netip.Addr{lanIP, lanIP6}, SkipDAD: true, Table: c.Neighbours})
		if err != nil {
			f.Fatal(err)
		}
		c.Responder = rsp
	})
	buf := make([]byte, 2048)
	f.Fuzz(func(t *testing.T, frame []byte) {
		before := r.dev.Stats()
		var size int
		r.dev.rmu.Lock()
		ok := r.dev.take(frame, buf, 16, &size, nil, nil)
		r.dev.rmu.Unlock()
		after := r.dev.Stats()
		var db, da uint64
		for i := range before.Drops {
			db += before.Drops[i]
			da += after.Drops[i]
		}
		if ok && (size > len(frame) || size < 20) {
			t.Fatalf("take = true with size %d of a %d-byte frame", size, len(frame))
		}
		if !ok && da > db+1 {
			t.Fatalf("take = false, drops went %d → %d, want at most one more", db, da)
		}
	})
}

// TestPortDeviceWriteKeepsFlowOrder: Write puts each packet on the TX queue
// of its flow, whatever the other packets of its batch, so that a flow
// arrives in order at a host with several queues. Each batch leads with a
// packet of a different flow and then carries the next packet of flow X;
// the host reads each of its RX queues' rings one after the other, so X's
// packets would come out of order if they had left on more than one queue.
func TestPortDeviceWriteKeepsFlowOrder(t *testing.T) {
	r := newPortRig(t, 2, nil)
	const off = 16
	pkt := func(sport uint16, seq uint32) []byte {
		var pl [4]byte
		binary.BigEndian.PutUint32(pl[:], seq)
		p := ipPacket(lanIP, hostIP, pl[:])
		binary.BigEndian.PutUint16(p[20:], sport)
		binary.BigEndian.PutUint16(p[22:], 9000)
		return append(make([]byte, off), p...)
	}
	const flowX, batches = 4242, 32
	for i := range batches {
		lead := pkt(uint16(1000+i), 0)
		if n, err := r.dev.Write([][]byte{lead, pkt(flowX, uint32(i))}, off); n != 2 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	got := r.collect(2 * batches)
	if len(got) != 2*batches {
		t.Fatalf("host received %d frames, want %d", len(got), 2*batches)
	}
	var seqs []uint32
	for _, f := range got {
		ip := f[14:]
		if binary.BigEndian.Uint16(ip[20:]) == flowX {
			seqs = append(seqs, binary.BigEndian.Uint32(ip[28:]))
		}
	}
	if len(seqs) != batches {
		t.Fatalf("flow X: %d packets, want %d", len(seqs), batches)
	}
	for i, s := range seqs {
		if s != uint32(i) {
			t.Fatalf("flow X arrived as %v, want 0..%d in order", seqs, batches-1)
		}
	}
	// Both queues carried traffic: the lead packets' flows spread.
	for q := range 2 {
		if r.a.Queue(q).Stats().TXPackets == 0 {
			t.Errorf("TX queue %d sent nothing; the test needs both", q)
		}
	}
}

// TestPortDeviceSendFrameErrors: SendFrame's errors wrap their cause, for
// errors.Is: a frame longer than a frame buffer (dataplane.ErrFrameTooLong)
// and a pool without a free frame (dataplane.ErrNoFreeFrame), each
// dropped and counted. (They were new errors that only said so in text.)
func TestPortDeviceSendFrameErrors(t *testing.T) {
	r := newPortRig(t, 1, nil)
	if err := r.dev.SendFrame(make([]byte, 1<<16)); !errors.Is(err, dataplane.ErrFrameTooLong) {
		t.Errorf("SendFrame(64 KiB) = %v, want dataplane.ErrFrameTooLong", err)
	}
	tx := r.a.Queue(0).TX()
	var held []dataplane.Frame
	for {
		fr := make([]dataplane.Frame, 64)
		n := tx.Alloc(fr)
		held = append(held, fr[:n]...)
		if n == 0 {
			break
		}
	}
	err := r.dev.SendFrame(ethFrame(macHost, macGW, 0x0806, make([]byte, 28)))
	tx.Free(held)
	if !errors.Is(err, dataplane.ErrNoFreeFrame) {
		t.Errorf("SendFrame with the pool empty (%d frames taken) = %v, want dataplane.ErrNoFreeFrame", len(held), err)
	}
	if d := r.dev.Stats().Drops; d[PortDropTooBig] != 1 || d[PortDropNoBuffer] != 1 {
		t.Errorf("drops %v, want too_big=1 and no_buffer=1", d.List())
	}
}

// TestPortDeviceRefusesMTU: an MTU outside [68, 65535] is refused, as
// SetLANMTU refuses one: it was taken and reported to wireguard-go.
func TestPortDeviceRefusesMTU(t *testing.T) {
	for _, mtu := range []int{-5, -1, 10, 67, 65536, 100000} {
		func() {
			a, b, err := memport.NewPair(memport.Config{Name: "mtu"})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			defer b.Close()
			routes, err := arp.NewStaticRoutes(nil)
			if err != nil {
				t.Fatal(err)
			}
			if dev, err := NewPortDevice(PortConfig{Port: a, MTU: mtu, Routes: routes, Neighbours: arp.NewTable(arp.Config{})}); err == nil {
				dev.Close()
				t.Errorf("NewPortDevice with MTU %d: nil error, want a refusal", mtu)
			}
		}()
	}
}

package bind

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/conn"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/testenv"
)

var (
	ourIP4  = netip.MustParseAddr("198.18.9.1")
	peerIP4 = netip.MustParseAddr("198.18.9.2")
	ourIP6  = netip.MustParseAddr("2001:2:0:9::1")
	peerIP6 = netip.MustParseAddr("2001:2:0:9::2")
	macA    = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0a}
	macB    = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0b}
)

const ourPort = 51820

// rig is a Bind on memport A; the test plays the peer on B.
type rig struct {
	a, b  *memport.Port
	bind  *Bind
	fns   []conn.ReceiveFunc
	table *arp.Table
}

func newRig(t testing.TB, queues int, mod func(*Config)) *rig {
	t.Helper()
	return newRigPorts(t, memport.Config{Queues: queues, RingSize: 4096}, mod)
}

// newRigPorts is newRig over a memport pair of pc (its MACs set here).
func newRigPorts(t testing.TB, pc memport.Config, mod func(*Config)) *rig {
	t.Helper()
	queues := max(pc.Queues, 1)
	pc.MACA, pc.MACB = macA, macB
	a, b, err := memport.NewPair(pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	routes, err := arp.NewStaticRoutes([]arp.Route{
		{Prefix: netip.MustParsePrefix("198.18.9.0/24")},
		{Prefix: netip.MustParsePrefix("2001:2:0:9::/64")},
		{Prefix: netip.MustParsePrefix("198.18.100.0/24"), Gateway: peerIP4},
	})
	if err != nil {
		t.Fatal(err)
	}
	tbl := arp.NewTable(arp.Config{})
	tbl.Set(peerIP4, arp.MAC(macB), arp.StateReachable)
	tbl.Set(peerIP6, arp.MAC(macB), arp.StateReachable)
	cfg := Config{Port: a, Addr4: ourIP4, Addr6: ourIP6, ListenPort: ourPort, Routes: routes, Neighbours: tbl}
	if mod != nil {
		mod(&cfg)
	}
	bd, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fns, port, err := bd.Open(0)
	if err != nil || port != ourPort || len(fns) != queues {
		t.Fatalf("Open(0) = %d fns, %d, %v; want %d, %d, nil", len(fns), port, err, queues, ourPort)
	}
	t.Cleanup(func() { bd.Close() })
	return &rig{a: a, b: b, bind: bd, fns: fns, table: tbl}
}

// sum1071 is the Internet checksum written out plainly (RFC 1071 §4.1),
// the reference for the checksums the Bind writes.
func sum1071(parts ...[]byte) uint16 {
	var all []byte
	for _, p := range parts {
		all = append(all, p...)
	}
	if len(all)%2 == 1 {
		all = append(all, 0)
	}
	var s uint32
	for i := 0; i < len(all); i += 2 {
		s += uint32(all[i])<<8 | uint32(all[i+1])
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// pseudo returns the UDP pseudo-header (RFC 768, RFC 8200 §8.1).
func pseudo(src, dst netip.Addr, ulen int) []byte {
	var p []byte
	p = append(p, src.AsSlice()...)
	p = append(p, dst.AsSlice()...)
	if src.Is4() {
		return append(p, 0, header.ProtoUDP, byte(ulen>>8), byte(ulen))
	}
	return append(p, 0, 0, byte(ulen>>8), byte(ulen), 0, 0, 0, header.ProtoUDP)
}

// udpFrame builds an Ethernet/IP/UDP frame byte by byte, with a correct
// UDP checksum when cksum is set (always on IPv6).
func udpFrame(src, dst netip.AddrPort, payload []byte, cksum bool) []byte {
	ulen := 8 + len(payload)
	u := make([]byte, 8, ulen)
	binary.BigEndian.PutUint16(u[0:], src.Port())
	binary.BigEndian.PutUint16(u[2:], dst.Port())
	binary.BigEndian.PutUint16(u[4:], uint16(ulen))
	u = append(u, payload...)
	if cksum || src.Addr().Is6() {
		c := sum1071(pseudo(src.Addr(), dst.Addr(), ulen), u)
		if c == 0 {
			c = 0xffff
		}
		binary.BigEndian.PutUint16(u[6:], c)
	}
	f := append([]byte{}, macA...)
	f = append(f, macB...)
	if src.Addr().Is4() {
		f = append(f, 0x08, 0x00)
		ip := []byte{0x45, 0, byte((20 + ulen) >> 8), byte(20 + ulen), 0, 0, 0x40, 0, 64, header.ProtoUDP, 0, 0}
		ip = append(ip, src.Addr().AsSlice()...)
		ip = append(ip, dst.Addr().AsSlice()...)
		binary.BigEndian.PutUint16(ip[10:], sum1071(ip))
		f = append(f, ip...)
	} else {
		f = append(f, 0x86, 0xdd)
		ip := []byte{0x60, 0, 0, 0, byte(ulen >> 8), byte(ulen), header.ProtoUDP, 64}
		ip = append(ip, src.Addr().AsSlice()...)
		ip = append(ip, dst.Addr().AsSlice()...)
		f = append(f, ip...)
	}
	return append(f, u...)
}

// inject transmits raw frames from the peer's side (queue q).
func (r *rig) inject(t testing.TB, q int, frames ...[]byte) {
	t.Helper()
	tx := r.b.Queue(q).TX()
	fs := make([]dataplane.Frame, len(frames))
	if n := tx.Alloc(fs); n != len(fs) {
		t.Fatalf("Alloc = %d, want %d", n, len(fs))
	}
	for i, b := range frames {
		fs[i].SetLen(len(b))
		copy(fs[i].Data(), b)
	}
	if n := tx.Transmit(fs); n != len(fs) {
		t.Fatalf("Transmit = %d, want %d", n, len(fs))
	}
}

// collect reads every frame the peer has received, waiting up to d for
// want of them.
func (r *rig) collect(t testing.TB, want int, d time.Duration) [][]byte {
	t.Helper()
	var out [][]byte
	fs := make([]dataplane.Frame, 256)
	deadline := time.Now().Add(d)
	for len(out) < want && time.Now().Before(deadline) {
		got := 0
		for q := range r.b.NumQueues() {
			rx := r.b.Queue(q).RX()
			n := rx.Receive(fs)
			for i := range n {
				out = append(out, append([]byte(nil), fs[i].Data()...))
			}
			rx.Free(fs[:n])
			got += n
		}
		if got == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	return out
}

func recvBufs() ([][]byte, []int, []conn.Endpoint) {
	bufs := make([][]byte, BatchSize)
	for i := range bufs {
		bufs[i] = make([]byte, 2048)
	}
	return bufs, make([]int, BatchSize), make([]conn.Endpoint, BatchSize)
}

// readAll runs a reader on each of fns (each into its own buffers) until
// it returns an error (the bind closed), calling got with the count of
// each batch that holds datagrams; wg counts the readers.
func readAll(wg *sync.WaitGroup, fns []conn.ReceiveFunc, got func(n int)) {
	for _, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bufs, sizes, eps := recvBufs()
			for {
				n, err := fn(bufs, sizes, eps)
				if err != nil {
					return
				}
				if n > 0 {
					got(n)
				}
			}
		}()
	}
}

// TestSendFrames checks every byte of what Send writes against frames
// built by hand, with checksums from the plain RFC 1071 reference: IPv4
// with DF clear and consecutive identifications (DF was set, the ID 0:
// a router with a smaller MTU dropped the tunnel's large packets).
func TestSendFrames(t *testing.T) {
	payload := []byte("\x04\x00\x00\x00 transport data, or any WireGuard message")
	tests := []struct {
		name  string
		dst   netip.AddrPort
		cksum bool
	}{
		{"ipv4 no checksum", netip.AddrPortFrom(peerIP4, 1234), false},
		{"ipv4 checksum", netip.AddrPortFrom(peerIP4, 1234), true},
		{"ipv6", netip.AddrPortFrom(peerIP6, 4321), false},
		{"ipv4 via gateway", netip.AddrPortFrom(netip.MustParseAddr("198.18.100.7"), 9), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, 1, func(c *Config) { c.ChecksumIPv4 = tt.cksum })
			ep, err := r.bind.ParseEndpoint(tt.dst.String())
			if err != nil {
				t.Fatal(err)
			}
			if err := r.bind.Send([][]byte{payload, payload[:1]}, ep); err != nil {
				t.Fatalf("Send = %v, want nil", err)
			}
			got := r.collect(t, 2, time.Second)
			if len(got) != 2 {
				t.Fatalf("peer received %d frames, want 2", len(got))
			}
			src := ourIP4
			if tt.dst.Addr().Is6() {
				src = ourIP6
			}
			for i, p := range [][]byte{payload, payload[:1]} {
				want := udpFrame(netip.AddrPortFrom(src, ourPort), tt.dst, p, tt.cksum)
				// The hand-built frame goes B→A; swap the MACs.
				copy(want[0:6], macB)
				copy(want[6:12], macA)
				if src.Is4() {
					// DF clear, as the kernel's WireGuard sends, and
					// an identification a datagram: the first's,
					// then one more.
					id := binary.BigEndian.Uint16(got[0][18:20]) + uint16(i)
					ip := want[14:34]
					ip[6] = 0
					binary.BigEndian.PutUint16(ip[4:6], id)
					binary.BigEndian.PutUint16(ip[10:12], 0)
					binary.BigEndian.PutUint16(ip[10:12], sum1071(ip))
				}
				if !bytes.Equal(got[i], want) {
					t.Errorf("frame %d =\n%x\nwant\n%x", i, got[i], want)
				}
			}
			if s := r.bind.Stats(); s.TXPackets != 2 {
				t.Errorf("Stats().TXPackets = %d, want 2", s.TXPackets)
			}
		})
	}
}

func TestSendErrors(t *testing.T) {
	r := newRig(t, 1, func(c *Config) { c.ResolveWait = 20 * time.Millisecond; c.Addr6 = netip.Addr{} })
	tests := []struct {
		dst  string
		want error
	}{
		{"198.51.100.1:1", ErrNoRoute},
		{"198.18.9.77:1", ErrNoNeighbour},
		{"[2001:2:0:9::2]:1", ErrNoAddress},
	}
	for _, tt := range tests {
		ep, err := r.bind.ParseEndpoint(tt.dst)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.bind.Send([][]byte{{1}}, ep); !errors.Is(err, tt.want) {
			t.Errorf("Send(to %s) = %v, want %v", tt.dst, err, tt.want)
		}
	}
	if err := r.bind.Send([][]byte{{1}}, &conn.StdNetEndpoint{}); !errors.Is(err, conn.ErrWrongEndpointType) {
		t.Errorf("Send(StdNetEndpoint) = %v, want ErrWrongEndpointType", err)
	}
	if err := r.bind.Send([][]byte{{1}}, (*Endpoint)(nil)); !errors.Is(err, conn.ErrWrongEndpointType) {
		t.Errorf("Send((*Endpoint)(nil)) = %v, want ErrWrongEndpointType", err)
	}
}

func TestReceive(t *testing.T) {
	r := newRig(t, 1, func(c *Config) { c.VerifyChecksum = true })
	from4 := netip.AddrPortFrom(peerIP4, 40000)
	from6 := netip.AddrPortFrom(peerIP6, 40001)
	r.inject(t, 0,
		udpFrame(from4, netip.AddrPortFrom(ourIP4, ourPort), []byte("one"), false),
		udpFrame(from6, netip.AddrPortFrom(ourIP6, ourPort), []byte("two"), false),
		udpFrame(from4, netip.AddrPortFrom(ourIP4, ourPort+1), []byte("wrong port"), false),
		udpFrame(from4, netip.AddrPortFrom(ourIP4, ourPort), []byte("three"), true),
	)
	bufs, sizes, eps := recvBufs()
	var got []string
	var gotEps []conn.Endpoint
	for len(got) < 3 {
		n, err := r.fns[0](bufs, sizes, eps)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			got = append(got, string(bufs[i][:sizes[i]]))
			gotEps = append(gotEps, eps[i])
		}
	}
	if want := []string{"one", "two", "three"}; !equalStrings(got, want) {
		t.Fatalf("received %q, want %q", got, want)
	}
	for i, want := range []netip.AddrPort{from4, from6, from4} {
		e := gotEps[i].(*Endpoint)
		if e.AddrPort() != want || e.DstToString() != want.String() {
			t.Errorf("endpoint %d = %v, want %v", i, e.AddrPort(), want)
		}
	}
	if gotEps[0] != gotEps[2] {
		t.Error("two datagrams from one source got two endpoints, want the cached one")
	}
	if e := gotEps[1].(*Endpoint); e.SrcToString() != netip.AddrPortFrom(ourIP6, ourPort).String() {
		t.Errorf("SrcToString() = %q, want our IPv6 address and port", e.SrcToString())
	}
	if s := r.bind.Stats(); s.RXPackets != 3 || s.Drops[DropNotOurs] != 1 {
		t.Errorf("Stats() RXPackets %d, not ours %d; want 3, 1", s.RXPackets, s.Drops[DropNotOurs])
	}
}

// TestReceiveNoRoom: a ReceiveFunc given no room (no packet buffers, or
// no sizes or endpoints) returns 0 and nil at once, leaving what waits for
// the next call, and net.ErrClosed after Close. Before, it blocked for
// good (it waited for a datagram it had no room to return), with or
// without datagrams waiting.
func TestReceiveNoRoom(t *testing.T) {
	r := newRig(t, 1, nil)
	from := netip.AddrPortFrom(peerIP4, 40000)
	r.inject(t, 0, udpFrame(from, netip.AddrPortFrom(ourIP4, ourPort), []byte("kept"), false))
	bufs, sizes, eps := recvBufs()
	for _, c := range []struct {
		name  string
		bufs  [][]byte
		sizes []int
		eps   []conn.Endpoint
	}{
		{"no packets", nil, sizes, eps},
		{"no sizes", bufs, nil, eps},
		{"no endpoints", bufs, sizes, nil},
	} {
		returned, err := testenv.ReturnsWithin(5*time.Second, func() error {
			n, err := r.fns[0](c.bufs, c.sizes, c.eps)
			if err == nil && n != 0 {
				err = fmt.Errorf("n = %d", n)
			}
			return err
		})
		if !returned {
			t.Fatalf("%s: ReceiveFunc blocked 5 s", c.name)
		}
		if err != nil {
			t.Errorf("%s: ReceiveFunc = %v, want 0 and nil", c.name, err)
		}
	}
	if n, err := r.fns[0](bufs, sizes, eps); n != 1 || err != nil || string(bufs[0][:sizes[0]]) != "kept" {
		t.Errorf("ReceiveFunc after calls without room = %d, %v; want the datagram kept", n, err)
	}
	r.bind.Close()
	if _, err := r.fns[0](nil, nil, nil); !errors.Is(err, net.ErrClosed) {
		t.Errorf("ReceiveFunc without room after Close = %v, want net.ErrClosed", err)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestBadInput feeds malformed and foreign frames, then a good one: only
// the good one comes out, the rest are counted by reason.
func TestBadInput(t *testing.T) {
	from := netip.AddrPortFrom(peerIP4, 40000)
	to := netip.AddrPortFrom(ourIP4, ourPort)
	good := udpFrame(from, to, []byte("good"), true)
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	arpReq := make([]byte, 60)
	n, _ := (&arp.ARP{EthDst: arp.Broadcast, EthSrc: arp.MAC(macB), Op: arp.ARPRequest, SenderMAC: arp.MAC(macB), SenderIP: peerIP4, TargetIP: ourIP4}).Marshal(arpReq)
	tests := []struct {
		name  string
		frame []byte
		want  DropReason
		parse header.Reason
	}{
		{"truncated IPv4", good[:20], DropMalformed, header.ReasonTruncatedIP},
		{"IPv4 length past frame", mut(func(b []byte) []byte { b[16]++; b[24]--; return b }), DropMalformed, header.ReasonLengthExceedsFrame},
		{"bad IPv4 header checksum", mut(func(b []byte) []byte { b[22]++; return b }), DropMalformed, header.ReasonBadIPv4Checksum},
		{"UDP length past IP", mut(func(b []byte) []byte { b[38] = 0xff; return b }), DropMalformed, header.ReasonBadUDPLength},
		{"UDP length below 8", mut(func(b []byte) []byte { b[39] = 7; b[38] = 0; return b }), DropMalformed, header.ReasonBadUDPLength},
		{"bad UDP checksum", mut(func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b }), DropBadChecksum, 0},
		{"IPv6 zero checksum", func() []byte {
			b := udpFrame(netip.AddrPortFrom(peerIP6, 1), netip.AddrPortFrom(ourIP6, ourPort), []byte("x"), true)
			b[60], b[61] = 0, 0
			return b
		}(), DropMalformed, header.ReasonUDPZeroChecksum},
		{"garbage EtherType", mut(func(b []byte) []byte { b[12], b[13] = 0x88, 0xcc; return b }), DropNotIP, 0},
		{"ARP without responder", arpReq[:n], DropNotIP, 0},
		{"GRE", mut(func(b []byte) []byte {
			b[23] = 47 // GRE
			b[24], b[25] = 0, 0
			binary.BigEndian.PutUint16(b[24:], sum1071(b[14:34]))
			return b
		}), DropNotUDP, 0},
		{"other address", udpFrame(from, netip.AddrPortFrom(peerIP4, ourPort), []byte("x"), true), DropNotOurs, 0},
		// Another VLAN's frame is never WireGuard for us (isolation as
		// the XDP program keeps it; a priority tag, VID 0, would pass).
		{"VLAN 100", mut(func(b []byte) []byte { return slices.Concat(b[:12], []byte{0x81, 0, 0, 100}, b[12:]) }), DropVLAN, 0},
		{"802.1ad", mut(func(b []byte) []byte { return slices.Concat(b[:12], []byte{0x88, 0xa8, 0, 0}, b[12:]) }), DropVLAN, 0},
		{"stacked tags", mut(func(b []byte) []byte { return slices.Concat(b[:12], []byte{0x81, 0, 0, 0, 0x81, 0, 0, 7}, b[12:]) }), DropVLAN, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, 1, func(c *Config) { c.VerifyChecksum = true })
			r.inject(t, 0, tt.frame, good)
			bufs, sizes, eps := recvBufs()
			n, err := r.fns[0](bufs, sizes, eps)
			if err != nil || n != 1 || string(bufs[0][:sizes[0]]) != "good" {
				t.Fatalf("receive = %d %q, %v; want 1 \"good\", nil", n, bufs[0][:sizes[0]], err)
			}
			s := r.bind.Stats()
			if s.Drops[tt.want] != 1 {
				t.Errorf("Drops[%v] = %d, want 1 (all: %v)", tt.want, s.Drops[tt.want], s.Drops)
			}
			if tt.parse != 0 && s.Parse[tt.parse] != 1 {
				t.Errorf("Parse[%v] = %d, want 1", tt.parse, s.Parse[tt.parse])
			}
		})
	}
}

// TestOwnedARP answers an ARP request for our address through the
// Responder, and learns the asker.
func TestOwnedARP(t *testing.T) {
	var rsp *arp.Responder
	r := newRig(t, 1, func(c *Config) {
		var err error
		rsp, err = arp.NewResponder(arp.ResponderConfig{MAC: arp.MAC(macA), Addrs: []netip.Addr{ourIP4, ourIP6}, SkipDAD: true, Table: c.Neighbours})
		if err != nil {
			t.Fatal(err)
		}
		c.Responder = rsp
	})
	asker := netip.MustParseAddr("198.18.9.3")
	req := make([]byte, 60)
	n, err := (&arp.ARP{EthDst: arp.Broadcast, EthSrc: arp.MAC(macB), Op: arp.ARPRequest, SenderMAC: arp.MAC(macB), SenderIP: asker, TargetIP: ourIP4}).Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	r.inject(t, 0, req[:n], udpFrame(netip.AddrPortFrom(peerIP4, 1), netip.AddrPortFrom(ourIP4, ourPort), []byte("x"), false))
	bufs, sizes, eps := recvBufs()
	if n, err := r.fns[0](bufs, sizes, eps); n != 1 || err != nil {
		t.Fatalf("receive = %d, %v; want 1, nil", n, err)
	}
	got := r.collect(t, 1, time.Second)
	if len(got) != 1 {
		t.Fatalf("peer received %d frames, want 1 ARP reply", len(got))
	}
	a, rs := arp.ParseARP(got[0])
	if rs != arp.ReasonNone || a.Op != arp.ARPReply || a.SenderIP != ourIP4 || a.SenderMAC != arp.MAC(macA) || a.TargetIP != asker {
		t.Errorf("reply = %+v (%v), want %v is-at %v to %v", a, rs, ourIP4, macA, asker)
	}
	if s := r.bind.Stats(); s.NeighbourReplies != 1 {
		t.Errorf("NeighbourReplies = %d, want 1", s.NeighbourReplies)
	}
	// The same request tagged for VLAN 100: another VLAN's, counted as
	// such (it read not_ip), and not answered.
	tagged := append(append(append([]byte{}, req[:12]...), 0x81, 0x00, 0x00, 100), req[12:n]...)
	before := r.bind.Stats()
	r.inject(t, 0, tagged, udpFrame(netip.AddrPortFrom(peerIP4, 1), netip.AddrPortFrom(ourIP4, ourPort), []byte("x"), false))
	if n, err := r.fns[0](bufs, sizes, eps); n != 1 || err != nil {
		t.Fatalf("receive = %d, %v; want 1, nil", n, err)
	}
	after := r.bind.Stats()
	if d := after.Drops[DropVLAN] - before.Drops[DropVLAN]; d != 1 || after.Drops[DropNotIP] != before.Drops[DropNotIP] || after.NeighbourReplies != 1 {
		t.Errorf("ARP of VLAN 100: vlan +%d, not_ip +%d, replies %d; want +1, +0, 1", d, after.Drops[DropNotIP]-before.Drops[DropNotIP], after.NeighbourReplies)
	}
	if got := r.collect(t, 1, 50*time.Millisecond); len(got) != 0 {
		t.Errorf("ARP of VLAN 100: %d frames sent, want none", len(got))
	}
	// A count since New, as the others: wireguard-go closes and opens
	// the Bind again at each change of the listen port (it read 0).
	if err := r.bind.Close(); err != nil {
		t.Fatal(err)
	}
	if s := r.bind.Stats(); s.NeighbourReplies != 1 {
		t.Errorf("after Close: NeighbourReplies = %d, want 1", s.NeighbourReplies)
	}
	if _, _, err := r.bind.Open(ourPort); err != nil {
		t.Fatal(err)
	}
	if s := r.bind.Stats(); s.NeighbourReplies != 1 {
		t.Errorf("opened again: NeighbourReplies = %d, want 1", s.NeighbourReplies)
	}
}

// TestClose: a blocked ReceiveFunc and later calls return net.ErrClosed;
// the Bind opens again.
// TestReceivePortClosed: ReceiveFuncs blocked when the port is closed
// under the bind (closed before it, against its contract) return an error
// wrapping dataplane.ErrClosed (not net.ErrClosed: the bind is open); they
// polled the closed port, a CPU's worth, until the bind closed.
func TestReceivePortClosed(t *testing.T) {
	r := newRig(t, 2, nil)
	errc := make(chan error, len(r.fns))
	for _, fn := range r.fns {
		go func() {
			bufs, sizes, eps := recvBufs()
			_, err := fn(bufs, sizes, eps)
			errc <- err
		}()
	}
	time.Sleep(20 * time.Millisecond)
	r.a.Close()
	for range r.fns {
		select {
		case err := <-errc:
			if !errors.Is(err, dataplane.ErrClosed) || errors.Is(err, net.ErrClosed) {
				t.Errorf("ReceiveFunc whose port closed = %v, want dataplane.ErrClosed (the bind is open)", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a ReceiveFunc whose port closed did not return in 10 s")
		}
	}
}

func TestClose(t *testing.T) {
	r := newRig(t, 2, nil)
	errc := make(chan error, 2)
	for _, fn := range r.fns {
		go func() {
			bufs, sizes, eps := recvBufs()
			_, err := fn(bufs, sizes, eps)
			errc <- err
		}()
	}
	time.Sleep(20 * time.Millisecond)
	if err := r.bind.Close(); err != nil {
		t.Fatal(err)
	}
	for range r.fns {
		if err := <-errc; !errors.Is(err, net.ErrClosed) {
			t.Errorf("blocked ReceiveFunc after Close = %v, want net.ErrClosed", err)
		}
	}
	bufs, sizes, eps := recvBufs()
	if _, err := r.fns[0](bufs, sizes, eps); !errors.Is(err, net.ErrClosed) {
		t.Errorf("ReceiveFunc after Close = %v, want net.ErrClosed", err)
	}
	ep, _ := r.bind.ParseEndpoint("198.18.9.2:1")
	if err := r.bind.Send([][]byte{{1}}, ep); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Send after Close = %v, want net.ErrClosed", err)
	}
	if _, _, err := r.bind.Open(ourPort + 1); err == nil {
		t.Error("Open(another port) = nil error, want one")
	}
	fns, _, err := r.bind.Open(ourPort)
	if err != nil {
		t.Fatalf("Open again = %v", err)
	}
	if _, _, err := r.bind.Open(0); !errors.Is(err, conn.ErrBindAlreadyOpen) {
		t.Errorf("second Open = %v, want ErrBindAlreadyOpen", err)
	}
	r.inject(t, 0, udpFrame(netip.AddrPortFrom(peerIP4, 1), netip.AddrPortFrom(ourIP4, ourPort), []byte("again"), false))
	r.inject(t, 1, udpFrame(netip.AddrPortFrom(peerIP4, 1), netip.AddrPortFrom(ourIP4, ourPort), []byte("again"), false))
	// memport RSS puts the frames on a queue by hash: read both queues at
	// once, each into its own buffers, until both datagrams came (a queue
	// that got none blocks until Close).
	counts := make(chan int, 2*len(fns)+2)
	var readers sync.WaitGroup
	readAll(&readers, fns, func(n int) { counts <- n })
	got := 0
	for deadline := time.After(10 * time.Second); got < 2; {
		select {
		case n := <-counts:
			got += n
			continue
		case <-deadline:
		}
		break
	}
	r.bind.Close()
	readers.Wait()
	if got != 2 {
		t.Errorf("received %d datagrams after reopening, want 2", got)
	}
}

// TestConcurrentSend: several goroutines Send at once; every datagram
// arrives once (run with -race).
func TestConcurrentSend(t *testing.T) {
	r := newRig(t, 2, nil)
	const senders, batches, per = 4, 50, 8
	ep, _ := r.bind.ParseEndpoint("198.18.9.2:7")
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bufs := make([][]byte, per)
			for b := range batches {
				for i := range bufs {
					bufs[i] = binary.BigEndian.AppendUint32(nil, uint32(s<<24|b<<8|i))
				}
				if err := r.bind.Send(bufs, ep); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	seen := make(map[uint32]bool)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for len(seen) < senders*batches*per {
		got := r.collect(t, 1, 2*time.Second)
		if len(got) == 0 {
			break
		}
		for _, f := range got {
			v := binary.BigEndian.Uint32(f[hdr4:])
			if seen[v] {
				t.Fatalf("datagram %#x received twice", v)
			}
			seen[v] = true
		}
	}
	<-done
	if len(seen) != senders*batches*per {
		t.Errorf("received %d datagrams, want %d", len(seen), senders*batches*per)
	}
}

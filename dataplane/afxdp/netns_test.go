//go:build linux

package afxdp

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// vethPair is two namespaces joined by a veth pair, 198.18.7.1 on A and
// 198.18.7.2 on B.
type vethPair struct {
	tp         *topo.Topology
	a, b       *topo.NS
	v          *topo.Veth
	ipA, ipB   netip.Addr
	macA, macB net.HardwareAddr
}

func newVethPair(t testing.TB, queues int) *vethPair {
	t.Helper()
	return newVethPairIn(t, testenv.Topology(t, "xdp"), queues)
}

// newVethPairIn is newVethPair in a topology the caller made (and removes),
// reporting failures on t: a subtest can make a pair that outlives it.
func newVethPairIn(t testing.TB, tp *topo.Topology, queues int) *vethPair {
	t.Helper()
	a, b := testenv.NS(t, tp, "a"), testenv.NS(t, tp, "b")
	v, err := tp.NewVeth(a, b, topo.VethConfig{Queues: queues})
	if err != nil {
		t.Fatal(err)
	}
	p := &vethPair{tp: tp, a: a, b: b, v: v, ipA: netip.MustParseAddr("198.18.7.1"), ipB: netip.MustParseAddr("198.18.7.2")}
	if err := a.AddAddr(v.A, "198.18.7.1/24"); err != nil {
		t.Fatal(err)
	}
	if err := b.AddAddr(v.B, "198.18.7.2/24"); err != nil {
		t.Fatal(err)
	}
	if p.macA, err = a.LinkMAC(v.A); err != nil {
		t.Fatal(err)
	}
	if p.macB, err = b.LinkMAC(v.B); err != nil {
		t.Fatal(err)
	}
	return p
}

// openIn opens dev inside ns and closes it when the test ends.
func openIn(t testing.TB, ns *topo.NS, dev string, cfg Config) *Port {
	t.Helper()
	var p *Port
	err := ns.Do(func() error {
		var err error
		p, err = Open(dev, cfg)
		return err
	})
	if err != nil {
		t.Fatalf("Open(%s) in %s: %v", dev, ns.Name, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// udpFrame writes an Ethernet/IPv4/UDP frame with full checksums into b and
// returns its length.
func udpFrame(b []byte, srcMAC, dstMAC net.HardwareAddr, src, dst netip.AddrPort, payload []byte) int {
	copy(b[0:6], dstMAC)
	copy(b[6:12], srcMAC)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:34]
	total := 20 + 8 + len(payload)
	ip[0], ip[1] = 0x45, 0
	binary.BigEndian.PutUint16(ip[2:], uint16(total))
	binary.BigEndian.PutUint32(ip[4:], 0)
	ip[8], ip[9] = 64, 17
	binary.BigEndian.PutUint16(ip[10:], 0)
	s4, d4 := src.Addr().As4(), dst.Addr().As4()
	copy(ip[12:16], s4[:])
	copy(ip[16:20], d4[:])
	binary.BigEndian.PutUint16(ip[10:], ^checksum(ip, 0))
	udp := b[34 : 42+len(payload)]
	binary.BigEndian.PutUint16(udp[0:], src.Port())
	binary.BigEndian.PutUint16(udp[2:], dst.Port())
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(payload)))
	binary.BigEndian.PutUint16(udp[6:], 0)
	copy(udp[8:], payload)
	// Pseudo-header (RFC 768): addresses, protocol, UDP length.
	var sum uint32
	sum += uint32(binary.BigEndian.Uint16(s4[0:])) + uint32(binary.BigEndian.Uint16(s4[2:]))
	sum += uint32(binary.BigEndian.Uint16(d4[0:])) + uint32(binary.BigEndian.Uint16(d4[2:]))
	sum += 17 + uint32(len(udp))
	c := ^checksum(udp, sum)
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(udp[6:], c)
	return 14 + total
}

// checksum is the RFC 1071 one's-complement sum of b plus initial.
func checksum(b []byte, initial uint32) uint16 {
	sum := initial
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}

// reflectIPv4UDP turns a received Ethernet/IPv4/UDP frame around in place:
// MACs, addresses and ports swapped. Swapping keeps every checksum valid
// (the one's-complement sum is commutative). Other frames are left alone
// and reported false.
func reflectIPv4UDP(b []byte) bool {
	if len(b) < 42 || binary.BigEndian.Uint16(b[12:]) != 0x0800 || b[14] != 0x45 || b[23] != 17 {
		return false
	}
	var mac [6]byte
	copy(mac[:], b[0:6])
	copy(b[0:6], b[6:12])
	copy(b[6:12], mac[:])
	var a [4]byte
	copy(a[:], b[26:30])
	copy(b[26:30], b[30:34])
	copy(b[30:34], a[:])
	var p [2]byte
	copy(p[:], b[34:36])
	copy(b[34:36], b[36:38])
	copy(b[36:38], p[:])
	return true
}

// reflector reflects IPv4/UDP frames on every queue of port until stop is
// closed, one goroutine per queue; done is closed when they have all left.
func reflector(port dataplane.Port, stop <-chan struct{}) (done <-chan struct{}) {
	d := make(chan struct{})
	left := make(chan struct{}, port.NumQueues())
	for i := range port.NumQueues() {
		go func(q dataplane.Queue) {
			defer func() { left <- struct{}{} }()
			reflectQueue(q, stop)
		}(port.Queue(i))
	}
	go func() {
		for range port.NumQueues() {
			<-left
		}
		close(d)
	}()
	return d
}

func reflectQueue(q dataplane.Queue, stop <-chan struct{}) {
	rx, tx := q.RX(), q.TX()
	w, err := dataplane.NewWaiter()
	if err != nil {
		return
	}
	defer w.Close()
	w.Add(rx)
	frames := make([]dataplane.Frame, 64)
	for {
		select {
		case <-stop:
			return
		default:
		}
		n := rx.Receive(frames)
		if n == 0 {
			tx.Reclaim()
			w.Wait(10 * time.Millisecond)
			continue
		}
		keep := frames[:0]
		var drop []dataplane.Frame
		for i := range n {
			if reflectIPv4UDP(frames[i].Data()) {
				keep = append(keep, frames[i])
			} else {
				drop = append(drop, frames[i])
			}
		}
		rx.Free(drop)
		m := tx.Transmit(keep)
		rx.Free(keep[m:])
	}
}

package tundev

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestOffloadTUNCoalescesOnlyWhatGROWould: a batch of one UDP flow whose
// IPv4 identifications do not follow each other (a sender with random or
// global IDs), forwarded by the kernel out of a veth, leaves it as it was
// written, each datagram with its own identification, as Linux's GRO,
// which coalesces only segments whose IDs follow each other (or are
// fixed, with DF: inet_gro_flush), would hand it on. wireguard-go's GRO
// does not look at the IDs: the datagrams it coalesced were segmented
// again by the kernel with the first one's ID counted up. A flow whose
// IDs follow each other is still coalesced.
func TestOffloadTUNCoalescesOnlyWhatGROWould(t *testing.T) {
	tp := testenv.Topology(t, "og")
	a, b := testenv.NS(t, tp, "a"), testenv.NS(t, tp, "b")
	const name = "wgpog0"
	dev := openOffloadTUN(t, a, name, 1)
	veth, err := tp.NewVeth(a, b, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		a.AddAddr(name, "198.18.81.1/24"), a.AddAddr(veth.A, "198.18.82.1/24"), b.AddAddr(veth.B, "198.18.82.2/24"),
		a.Sysctl("net.ipv4.ip_forward", "1"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Run("ip", "route", "add", "198.18.81.0/24", "via", "198.18.82.1"); err != nil {
		t.Fatal(err)
	}
	if err := a.Ping(netip.MustParseAddr("198.18.82.2"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// A raw socket in b sees each IPv4 UDP datagram as it arrived.
	var fd int
	if err := b.Do(func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 2}); err != nil {
		t.Fatal(err)
	}
	src, dst := netip.MustParseAddr("198.18.81.9"), netip.MustParseAddr("198.18.82.2")
	flow := func(ids ...uint16) [][]byte {
		var pkts [][]byte
		for _, id := range ids {
			p := udp4(src, dst)
			binary.BigEndian.PutUint16(p[4:6], id)
			header.IPv4(p).SetChecksum()
			pkts = append(pkts, p)
		}
		return pkts
	}
	recv := func(n int) (ids []uint16) {
		t.Helper()
		buf := make([]byte, 65536)
		for len(ids) < n {
			m, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				t.Fatalf("after %d datagrams (IDs %d): %v", len(ids), ids, err)
			}
			if m < header.IPv4MinLen+header.UDPLen || netip.AddrFrom4([4]byte(buf[12:16])) != src {
				continue
			}
			if m != len(flow(0)[0]) {
				t.Errorf("received a datagram of %d bytes, want %d", m, len(flow(0)[0]))
			}
			ids = append(ids, binary.BigEndian.Uint16(buf[4:6]))
		}
		return ids
	}
	for _, ids := range [][]uint16{
		{100, 7, 9000, 9001, 9003, 40000, 2, 3},  // scattered: as written
		{500, 501, 502, 503, 504, 505, 506, 507}, // one after another
	} {
		rx := kernelRX(t, a, name)
		if n := dev.WriteBatch(0, flow(ids...)); n != len(ids) {
			t.Fatalf("WriteBatch = %d, want %d", n, len(ids))
		}
		if got := recv(len(ids)); string(u16s(got)) != string(u16s(ids)) {
			t.Errorf("the kernel forwarded IDs %d, want %d (as written)", got, ids)
		}
		if ids[1] == ids[0]+1 {
			if k := kernelRX(t, a, name) - rx; k != 1 {
				t.Errorf("%d datagrams with IDs one after another reached the kernel as %d packets, want 1 (coalesced)", len(ids), k)
			}
		}
	}
}

// kernelRX is the RX packets of interface name in ns.
func kernelRX(t *testing.T, ns *topo.NS, name string) uint64 {
	t.Helper()
	l, err := ns.Handle().LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().Statistics.RxPackets
}

func u16s(v []uint16) []byte {
	b := make([]byte, 0, 2*len(v))
	for _, x := range v {
		b = binary.BigEndian.AppendUint16(b, x)
	}
	return b
}

// TestOffloadFollows: what WriteBatch keeps in one wireguard-go Write (a
// flow's candidates that follow each other as Linux's GRO takes them) and
// what it writes from a new one: a TCP segment after a pure ACK of its
// flow (wireguard-go would coalesce it with the segment before the ACK,
// two identifications apart), one out of order (wireguard-go coalesces it
// in front), an IPv6 segment of another flow label; another flow's packets
// and packets no GRO takes are never in the way.
func TestOffloadFollows(t *testing.T) {
	src, dst := [4]byte{198, 18, 83, 1}, [4]byte{198, 18, 84, 1}
	tcp4 := func(id uint16, seq uint32, flags byte, payload int, sport uint16) []byte {
		p := make([]byte, header.IPv4MinLen+20+payload)
		header.PutIPv4(p, &header.IPv4Fields{Protocol: header.ProtoTCP, ID: id, DontFragment: true, Src: src, Dst: dst}, 20+payload)
		binary.BigEndian.PutUint16(p[20:], sport)
		binary.BigEndian.PutUint16(p[22:], 443)
		binary.BigEndian.PutUint32(p[24:], seq)
		p[32], p[33] = 5<<4, flags
		return p
	}
	tcp6 := func(label uint32, seq uint32) []byte {
		p := make([]byte, header.IPv6Len+20+100)
		header.PutIPv6(p, &header.IPv6Fields{FlowLabel: label, NextHeader: header.ProtoTCP,
			Src: netip.MustParseAddr("2001:2::1").As16(), Dst: netip.MustParseAddr("2001:2:1::1").As16()}, 20+100)
		binary.BigEndian.PutUint32(p[44:], seq)
		p[52], p[53] = 5<<4, 0x10
		return p
	}
	const ack, psh = 0x10, 0x18
	for _, c := range []struct {
		name  string
		pkts  [][]byte
		split []bool // a new write before the packet
	}{
		{"in order", [][]byte{tcp4(1, 0, ack, 100, 1), tcp4(2, 100, ack, 100, 1), tcp4(3, 200, psh, 100, 1)}, []bool{false, false, false}},
		{"after a pure ACK", [][]byte{tcp4(1, 0, ack, 100, 1), tcp4(2, 100, ack, 0, 1), tcp4(3, 100, ack, 100, 1)}, []bool{false, false, true}},
		{"out of order", [][]byte{tcp4(1, 100, ack, 100, 1), tcp4(2, 0, ack, 100, 1)}, []bool{false, true}},
		{"a fixed ID", [][]byte{tcp4(0, 0, ack, 100, 1), tcp4(0, 100, ack, 100, 1)}, []bool{false, true}},
		{"another flow between", [][]byte{tcp4(1, 0, ack, 100, 1), tcp4(77, 5000, ack, 100, 2), tcp4(2, 100, ack, 100, 1)}, []bool{false, false, false}},
		{"a SYN between", [][]byte{tcp4(1, 0, ack, 100, 1), tcp4(9, 7, 0x02, 0, 1), tcp4(2, 100, ack, 100, 1)}, []bool{false, false, false}},
		{"one flow label", [][]byte{tcp6(5, 0), tcp6(5, 100)}, []bool{false, false}},
		{"another flow label", [][]byte{tcp6(5, 0), tcp6(6, 100)}, []bool{false, true}},
	} {
		var w offloadWriter
		k := 0
		for i, p := range c.pkts {
			m := groMetaOf(p)
			if split := k > 0 && !w.follows(k, p, m); split != c.split[i] {
				t.Errorf("%s: packet %d: a new write %v, want %v", c.name, i, split, c.split[i])
			} else if split {
				k = 0
			}
			w.batch[k] = append(make([]byte, offloadHeadroom), p...)
			w.meta[k] = m
			k++
		}
	}
}

//go:build linux

package toobig

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestLinkSourceChecks: ListenLink's reader returns the ICMPv6 message of
// an IPv6 packet whose checksum verifies, and skips one whose checksum
// does not, one with another next header, and one cut short (its payload
// length past the bytes read), as the kernel checks an ICMPv6 message for
// its sockets.
func TestLinkSourceChecks(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	src := linkSource{os.NewFile(uintptr(fds[0]), "a")}
	defer src.Close()
	w := os.NewFile(uintptr(fds[1]), "b")
	defer w.Close()
	msg := tooBig(1400, ours, peer, 51820, 0)
	packet := func(m []byte, sum bool) []byte {
		p := make([]byte, header.IPv6Len, header.IPv6Len+len(m))
		p[0], p[6], p[7] = 0x60, header.ProtoICMPv6, 255
		binary.BigEndian.PutUint16(p[4:6], uint16(len(m)))
		s, d := router.As16(), ours.As16()
		copy(p[8:24], s[:])
		copy(p[24:40], d[:])
		p = append(p, m...)
		c := p[header.IPv6Len:]
		c[2], c[3] = 0, 0
		binary.BigEndian.PutUint16(c[2:4], ^header.FoldChecksum(header.Checksum(c, header.PseudoHeaderChecksumBytes(header.ProtoICMPv6, p[8:24], p[24:40], len(c)))))
		if !sum {
			c[3] ^= 1
		}
		return p
	}
	bad := packet(msg, false)
	other := packet(msg, true)
	other[6] = header.ProtoUDP
	cut := packet(msg, true)
	cut = cut[:len(cut)-1]
	good := packet(msg, true)
	for _, p := range [][]byte{bad, other, cut, good} {
		if _, err := w.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	src.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1500)
	got, from, err := src.ReadMessage(buf)
	if err != nil || from != router || !bytes.Equal(got, good[header.IPv6Len:]) {
		t.Fatalf("ReadMessage = %x, %v, %v; want the good message from %v", got, from, err, router)
	}
	if tb, ok := Parse(got); !ok || tb.MTU != 1400 || tb.Dst != peer {
		t.Errorf("Parse = %+v, %v", tb, ok)
	}
}

// ptbFrame is an Ethernet frame to dstMAC carrying an IPv6 packet from src
// to dst whose payload is the ICMPv6 message msg, its checksum set.
func ptbFrame(dstMAC net.HardwareAddr, src, dst netip.Addr, msg []byte) []byte {
	f := make([]byte, 14+header.IPv6Len, 14+header.IPv6Len+len(msg))
	copy(f[0:6], dstMAC)
	f[6] = 0x02
	f[12], f[13] = 0x86, 0xdd
	p := f[14:]
	p[0], p[6], p[7] = 0x60, header.ProtoICMPv6, 255
	binary.BigEndian.PutUint16(p[4:6], uint16(len(msg)))
	s, d := src.As16(), dst.As16()
	copy(p[8:24], s[:])
	copy(p[24:40], d[:])
	f = append(f, msg...)
	c := f[14+header.IPv6Len:]
	c[2], c[3] = 0, 0
	binary.BigEndian.PutUint16(c[2:4], ^header.FoldChecksum(header.Checksum(c, header.PseudoHeaderChecksumBytes(header.ProtoICMPv6, s[:], d[:], len(c)))))
	return f
}

// linkPair is two namespaces joined by a veth (topology name), and the
// MAC address of a's end.
func linkPair(t *testing.T, name string) (a, b *topo.NS, v *topo.Veth, mac net.HardwareAddr) {
	t.Helper()
	tp := testenv.Topology(t, name)
	a, b = testenv.NS(t, tp, "a"), testenv.NS(t, tp, "b")
	v = testenv.Veth(t, tp, a, b)
	mac, err := a.LinkMAC(v.A)
	if err != nil {
		t.Fatal(err)
	}
	return a, b, v, mac
}

// followLink follows, into s, the errors ListenLink(vlan) reads on dev in
// ns that quote packets from ours, port 51820, on a 1,500-byte WAN.
func followLink(t *testing.T, ns *topo.NS, dev string, vlan uint16, s *setter, log *slog.Logger) *Follower {
	t.Helper()
	var src Source
	if err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		src, err = ListenLink(ifi.Index, vlan)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return Follow(Config{Source: src, Setter: s, Log: log,
		Ours:   func(src netip.Addr, sport uint16) bool { return src == ours && sport == 51820 },
		WANMTU: func() int { return 1500 }})
}

// TestFollowLinkDownUp: a Follower on ListenLink keeps following after
// its interface is set down and up again. The kernel reports ENETDOWN
// once to a packet socket whose interface goes down, and hands it packets
// again once the interface is up; before, that one error ended the
// Follower for good ("no longer read"), so that in owned address mode an
// `ip link set WAN down; ip link set WAN up` stopped every path MTU from
// being followed until a restart.
func TestFollowLinkDownUp(t *testing.T) {
	a, b, v, mac := linkPair(t, "tbl")
	var s setter
	var logs testenv.LogBuffer
	f := followLink(t, a, v.A, 0, &s, slog.New(slog.NewTextHandler(&logs, nil)))
	defer f.Close()
	if out, err := a.Run("ip", "link", "set", v.A, "down"); err != nil {
		t.Fatalf("ip link set %s down: %v\n%s", v.A, err, out)
	}
	if err := a.LinkUp(v.A); err != nil {
		t.Fatal(err)
	}
	// The veth's carrier comes back with its peer's; frames sent before
	// are lost, so send until one is read.
	ok := testenv.PollUntil(10*time.Second, func() bool {
		testenv.SendFrames(t, b, v.B, ptbFrame(mac, router, ours, tooBig(1400, ours, peer, 51820, 0)))
		return testenv.PollUntil(200*time.Millisecond, func() bool { return s.All()[peer] == 1400 })
	})
	if !ok {
		t.Fatalf("path MTUs %v after the interface went down and up, want %v at 1400; log:\n%s", s.All(), peer, logs.String())
	}
}

// tagged is the Ethernet frame f with an 802.1Q tag of VID vid inserted.
func tagged(f []byte, vid uint16) []byte { return taggedTPID(f, 0x8100, vid) }

// taggedTPID is the Ethernet frame f with a tag of TPID tpid and VID vid
// inserted.
func taggedTPID(f []byte, tpid, vid uint16) []byte {
	t := append([]byte(nil), f[:12]...)
	t = append(t, byte(tpid>>8), byte(tpid), byte(vid>>8), byte(vid))
	return append(t, f[12:]...)
}

// TestLinkVLAN: ListenLink takes "packet too big" only as the kernel
// would on an interface of its own: of the gateway's VLAN (WANVLAN; its
// tag in the frame here, taken off by the kernel) or, without one,
// untagged or priority-tagged, and only sent to the interface's MAC.
// Before, the socket took IPv6 of any VLAN (the kernel clears the tag of
// a VLAN it has no device for before a socket bound to IPv6 sees it) and
// to any MAC, so that a host of another VLAN on the same trunk could
// lower a path MTU. Each refused frame carries a lower MTU than the one
// taken, sent before it: a path MTU is never raised, so one taken would
// be what remains.
func TestLinkVLAN(t *testing.T) {
	a, b, v, mac := linkPair(t, "tbv")
	other := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x99}
	ptb := func(dst net.HardwareAddr, mtu uint32) []byte {
		return ptbFrame(dst, router, ours, tooBig(mtu, ours, peer, 51820, 0))
	}
	for _, c := range []struct {
		name    string
		vlan    uint16
		refused [][]byte
		taken   []byte
	}{
		{"vlan 7", 7, [][]byte{ptb(mac, 1300), tagged(ptb(mac, 1310), 8), tagged(ptb(other, 1320), 7), tagged(ptb(mac, 1330), 0),
			taggedTPID(ptb(mac, 1340), 0x88a8, 7)}, tagged(ptb(mac, 1400), 7)},
		{"untagged", 0, [][]byte{tagged(ptb(mac, 1300), 7), ptb(other, 1310)}, tagged(ptb(mac, 1400), 0)},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s setter
			f := followLink(t, a, v.A, c.vlan, &s, slog.New(slog.DiscardHandler))
			defer f.Close()
			testenv.SendFrames(t, b, v.B, append(c.refused, c.taken)...)
			if !testenv.PollUntil(5*time.Second, func() bool { return s.All()[peer] != 0 }) {
				t.Fatalf("no path MTU taken: %v", s.All())
			}
			if got := s.All()[peer]; got != 1400 {
				t.Errorf("path MTU %d, want 1400: a refused frame was taken", got)
			}
		})
	}
}

// TestListenLinkIgnoresOutgoing: ListenLink's socket, bound to every
// protocol of its interface, is no tap on the interface's transmit path
// (PACKET_IGNORE_OUTGOING): there the kernel cloned every frame the host
// sent on the WAN, for the socket filter to drop it.
func TestListenLinkIgnoresOutgoing(t *testing.T) {
	a, _, v, _ := linkPair(t, "tbo")
	var src Source
	if err := a.Do(func() error {
		ifi, err := net.InterfaceByName(v.A)
		if err != nil {
			return err
		}
		src, err = ListenLink(ifi.Index, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	rc, err := src.(linkSource).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var on int
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		on, gerr = unix.GetsockoptInt(int(fd), unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING)
	}); err != nil || gerr != nil {
		t.Fatal(err, gerr)
	}
	if on != 1 {
		t.Errorf("PACKET_IGNORE_OUTGOING = %d, want 1: every frame sent on the interface is cloned for the socket", on)
	}
}

//go:build linux

package header

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// Addresses of the kernel-capture test: the kernel host "k" owns .1, the
// capture side "c" (no addresses, an AF_PACKET socket) plays .2.
var (
	kAddr4 = netip.MustParseAddr("198.18.77.1")
	cAddr4 = netip.MustParseAddr("198.18.77.2")
	kAddr6 = netip.MustParseAddr("2001:2:0:77::1")
	cAddr6 = netip.MustParseAddr("2001:2:0:77::2")
)

type kernelRig struct {
	k, c       *topo.NS
	kMAC, cMAC MAC
	fd         int // AF_PACKET socket on the capture end, in c
	ifindex    int
}

// newKernelRig makes two namespaces joined by a veth with TX checksum
// offload off (so the kernel writes full checksums), addresses on the
// kernel side, static neighbours for the capture side, and a raw socket on
// the capture end. Everything goes when the test ends.
func newKernelRig(t *testing.T) *kernelRig {
	tp := testenv.Topology(t, "hdr")
	r := &kernelRig{k: testenv.NS(t, tp, "k"), c: testenv.NS(t, tp, "c")}
	v, err := tp.NewVeth(r.k, r.c, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{kAddr4.String() + "/24", kAddr6.String() + "/64"} {
		if err := r.k.AddAddr(v.A, a); err != nil {
			t.Fatal(err)
		}
	}
	km, err := r.k.LinkMAC(v.A)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := r.c.LinkMAC(v.B)
	if err != nil {
		t.Fatal(err)
	}
	r.kMAC, r.cMAC = MAC(km), MAC(cm)
	for _, a := range []netip.Addr{cAddr4, cAddr6} {
		if _, err := r.k.Run("ip", "neigh", "replace", a.String(), "lladdr", r.cMAC.String(), "nud", "permanent", "dev", v.A); err != nil {
			t.Fatal(err)
		}
	}
	err = r.c.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		r.fd = fd
		l, err := r.c.Handle().LinkByName(v.B)
		if err != nil {
			return err
		}
		r.ifindex = l.Attrs().Index
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: r.ifindex}); err != nil {
			return err
		}
		return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000})
	})
	if err != nil {
		t.Fatalf("AF_PACKET socket in %s: %v", r.c.Name, err)
	}
	t.Cleanup(func() { unix.Close(r.fd) })
	return r
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// capture calls send, then returns the first frame received (not sent)
// on the capture end that Parse accepts and match selects. A frame can be
// lost on a busy machine (a CPU's backlog queue, which every namespace's
// veths share, overflowing under other tests' floods), so send is called
// again every 1.5 s (past Linux's per-destination ICMPv6 rate limit, 1 s)
// up to 5 times before the test fails.
func (r *kernelRig) capture(t *testing.T, send func(), match func(frame []byte, p *Packet) bool) ([]byte, Packet) {
	t.Helper()
	buf := make([]byte, 9000)
	const tries, wait = 5, 1500 * time.Millisecond
	for range tries {
		send()
		deadline := time.Now().Add(wait)
		for time.Now().Before(deadline) {
			n, from, err := unix.Recvfrom(r.fd, buf, 0)
			if err != nil {
				continue // timeout: look at the deadline again
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			var p Packet
			if Parse(buf[:n], &p) == OK && match(buf[:n], &p) {
				return bytes.Clone(buf[:n]), p
			}
		}
	}
	t.Fatalf("no matching frame from the kernel in %d tries, %v each", tries, wait)
	return nil, Packet{}
}

// inject transmits frame on the capture end, toward the kernel.
func (r *kernelRig) inject(t *testing.T, frame []byte) {
	t.Helper()
	if err := unix.Sendto(r.fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: r.ifindex, Halen: 6, Addr: [8]byte(append(r.kMAC[:], 0, 0))}); err != nil {
		t.Fatalf("inject frame: %v", err)
	}
}

// sendUDP makes the kernel in k send payload from port sport to dst:9.
func (r *kernelRig) sendUDP(t *testing.T, dst netip.Addr, sport int, payload []byte) {
	t.Helper()
	err := r.k.Do(func() error {
		fam := unix.AF_INET
		if dst.Is6() {
			fam = unix.AF_INET6
		}
		fd, err := unix.Socket(fam, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		var la, ra unix.Sockaddr
		if dst.Is4() {
			la, ra = &unix.SockaddrInet4{Port: sport}, &unix.SockaddrInet4{Port: 9, Addr: dst.As4()}
		} else {
			la, ra = &unix.SockaddrInet6{Port: sport}, &unix.SockaddrInet6{Port: 9, Addr: dst.As16()}
		}
		if err := unix.Bind(fd, la); err != nil {
			return err
		}
		return unix.Sendto(fd, payload, 0, ra)
	})
	if err != nil {
		t.Fatalf("send UDP from the kernel to %v: %v", dst, err)
	}
}

// TestKernelChecksums checks the IPv4 header and UDP checksums of frames
// the Linux kernel built against this package, for both address families
// and odd and even lengths.
func TestKernelChecksums(t *testing.T) {
	r := newKernelRig(t)
	for i, size := range []int{0, 1, 2, 13, 100, 555, 1000, 1452} {
		for _, dst := range []netip.Addr{cAddr4, cAddr6} {
			payload := make([]byte, size)
			for j := range payload {
				payload[j] = byte(j*13 + size)
			}
			sport := 40000 + i
			frame, p := r.capture(t, func() { r.sendUDP(t, dst, sport, payload) }, func(_ []byte, p *Packet) bool {
				return p.Proto == ProtoUDP && p.DstPort == 9 && int(p.SrcPort) == sport && p.Dst == dst
			})
			if p.PayloadLen != size || !bytes.Equal(frame[p.PayloadOff:p.PayloadOff+p.PayloadLen], payload) {
				t.Errorf("kernel UDP to %v, %d bytes: Parse payload len %d", dst, size, p.PayloadLen)
			}
			if dst.Is4() {
				h := IPv4(frame[p.L3Off:])
				if !h.VerifyChecksum() || h.ComputeChecksum() != h.Checksum() {
					t.Errorf("kernel IPv4 header %x: checksum %#04x, ComputeChecksum %#04x", frame[p.L3Off:p.L4Off], h.Checksum(), h.ComputeChecksum())
				}
				if s := FoldChecksum(slowChecksum(frame[p.L3Off:p.L4Off], 0)); s != 0xffff {
					t.Errorf("kernel IPv4 header slow sum = %#04x, want 0xffff", s)
				}
			}
			u := UDP(frame[p.L4Off:p.L3End])
			ps := PseudoHeaderChecksum(ProtoUDP, p.Src, p.Dst, u.Length())
			if !u.VerifyChecksum(ps) || u.ComputeChecksum(ps) != u.Checksum() {
				t.Errorf("kernel UDP to %v, %d bytes: checksum %#04x, ComputeChecksum %#04x", dst, size, u.Checksum(), u.ComputeChecksum(ps))
			}
		}
	}
}

// TestKernelICMPQuote sends the kernel a large datagram to a closed port
// and compares its "port unreachable" with the "fragmentation needed" /
// "packet too big" this package builds for the same packet: the kernel's
// message must be ours with the type, code and 32-bit word changed (RFC 1624
// incremental update), which checks the quote length rule (576 / 1280 bytes)
// and the checksums together.
func TestKernelICMPQuote(t *testing.T) {
	r := newKernelRig(t)
	pl := make([]byte, 1400)
	for i := range pl {
		pl[i] = byte(i)
	}

	// IPv4: port unreachable (type 3 code 3) quoting up to 576 bytes.
	f4 := IPv4Fields{Protocol: ProtoUDP, DontFragment: true, ID: 7, Src: cAddr4.As4(), Dst: kAddr4.As4()}
	frame := make([]byte, EthernetLen+IPv4MinLen+UDPLen+len(pl))
	n := PutEthernet(frame, r.kMAC, r.cMAC, EtherTypeIPv4)
	n += PutIPv4(frame[n:], &f4, UDPLen+len(pl))
	PutUDP(frame[n:], 33333, 9, len(pl))
	copy(frame[n+UDPLen:], pl)
	UDP(frame[n:]).SetChecksum(PseudoHeaderChecksum(ProtoUDP, cAddr4, kAddr4, UDPLen+len(pl)))
	got, p := r.capture(t, func() { r.inject(t, frame) }, func(_ []byte, p *Packet) bool { return p.Proto == ProtoICMPv4 && p.Src == kAddr4 })
	kmsg := ICMPv4(got[p.L4Off:p.L3End])
	if kmsg.Type() != 3 || kmsg.Code() != 3 || !kmsg.VerifyChecksum() {
		t.Fatalf("kernel ICMPv4 %x: type %d code %d checksum ok %v, want 3 3 true", kmsg[:8], kmsg.Type(), kmsg.Code(), kmsg.VerifyChecksum())
	}
	out := make([]byte, 1500)
	m, reason := PutICMPv4FragNeeded(out, kAddr4.As4(), frame[EthernetLen:], 1280)
	if reason != OK {
		t.Fatalf("PutICMPv4FragNeeded() = %v", reason)
	}
	if m != p.L3End-p.L3Off {
		t.Errorf("PutICMPv4FragNeeded() = %d bytes, the kernel sent %d", m, p.L3End-p.L3Off)
	}
	ours := ICMPv4(out[IPv4MinLen:m])
	c := UpdateChecksum(ours.Checksum(), uint16(ICMPv4TypeDestUnreachable)<<8|ICMPv4CodeFragNeeded, 3<<8|3)
	c = UpdateChecksum(c, 1280, 0)
	ours[1] = 3
	binary.BigEndian.PutUint16(ours[6:8], 0)
	binary.BigEndian.PutUint16(ours[2:4], c)
	if !bytes.Equal(ours, kmsg) {
		t.Errorf("ICMPv4 built here, made a port unreachable:\n%x\nthe kernel's:\n%x", ours[:32], kmsg[:min(32, len(kmsg))])
	}

	// IPv6: port unreachable (type 1 code 4) quoting up to 1280 bytes.
	f6 := IPv6Fields{NextHeader: ProtoUDP, Src: cAddr6.As16(), Dst: kAddr6.As16()}
	frame = make([]byte, EthernetLen+IPv6Len+UDPLen+len(pl))
	n = PutEthernet(frame, r.kMAC, r.cMAC, EtherTypeIPv6)
	n += PutIPv6(frame[n:], &f6, UDPLen+len(pl))
	PutUDP(frame[n:], 33333, 9, len(pl))
	copy(frame[n+UDPLen:], pl)
	UDP(frame[n:]).SetChecksum(PseudoHeaderChecksum(ProtoUDP, cAddr6, kAddr6, UDPLen+len(pl)))
	got, p = r.capture(t, func() { r.inject(t, frame) }, func(b []byte, p *Packet) bool {
		return p.Proto == ProtoICMPv6 && p.Src == kAddr6 && b[p.L4Off] == 1
	})
	k6 := ICMPv6(got[p.L4Off:p.L3End])
	ps := PseudoHeaderChecksum(ProtoICMPv6, p.Src, p.Dst, len(k6))
	if k6.Code() != 4 || !k6.VerifyChecksum(ps) {
		t.Fatalf("kernel ICMPv6 %x: code %d checksum ok %v, want 4 true", k6[:8], k6.Code(), k6.VerifyChecksum(ps))
	}
	m, reason = PutICMPv6PacketTooBig(out, kAddr6.As16(), frame[EthernetLen:], 1280)
	if reason != OK {
		t.Fatalf("PutICMPv6PacketTooBig() = %v", reason)
	}
	if m != p.L3End-p.L3Off {
		t.Errorf("PutICMPv6PacketTooBig() = %d bytes, the kernel sent %d", m, p.L3End-p.L3Off)
	}
	o6 := ICMPv6(out[IPv6Len:m])
	c = UpdateChecksum(o6.Checksum(), uint16(ICMPv6TypePacketTooBig)<<8, 1<<8|4)
	c = UpdateChecksumBytes(c, o6[4:8], []byte{0, 0, 0, 0})
	o6[0], o6[1] = 1, 4
	binary.BigEndian.PutUint32(o6[4:8], 0)
	binary.BigEndian.PutUint16(o6[2:4], c)
	if !bytes.Equal(o6, k6) {
		t.Errorf("ICMPv6 built here, made a port unreachable:\n%x\nthe kernel's:\n%x", o6[:48], k6[:min(48, len(k6))])
	}
}

//go:build linux

package toobig

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/net/bpf"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/header"
)

// ListenICMP opens a raw ICMPv6 socket in the calling thread's network
// namespace that passes "packet too big" alone (ICMP6_FILTER), for a
// gateway whose WAN addresses are the kernel's (shared address mode): the
// WAN's XDP program passes the errors to the kernel, which delivers them
// to the socket, checksum verified. It needs CAP_NET_RAW and IPv6.
func ListenICMP() (Source, error) {
	c, err := icmp.ListenPacket("ip6:ipv6-icmp", "::")
	if err != nil {
		return nil, err
	}
	var f ipv6.ICMPFilter
	f.SetAll(true)
	f.Accept(ipv6.ICMPTypePacketTooBig)
	if err := c.IPv6PacketConn().SetICMPFilter(&f); err != nil {
		c.Close()
		return nil, err
	}
	return icmpSource{c}, nil
}

type icmpSource struct{ *icmp.PacketConn }

func (s icmpSource) ReadMessage(buf []byte) ([]byte, netip.Addr, error) {
	n, from, err := s.ReadFrom(buf)
	if err != nil {
		return nil, netip.Addr{}, err
	}
	var a netip.Addr
	if ip, ok := from.(*net.IPAddr); ok {
		a, _ = netip.AddrFromSlice(ip.IP)
	}
	return buf[:n], a.Unmap(), nil
}

// ListenLink opens a packet socket on the interface ifindex (of the
// calling thread's network namespace) that receives the IPv6 packets
// carrying an ICMPv6 "packet too big" the interface passes to the kernel
// (a socket filter drops the others in the kernel), for a gateway whose
// WAN address the kernel does not have (owned address mode): there the
// kernel drops them, and no ICMPv6 socket gets them. It takes only what
// the kernel would take on an interface of its own for that VLAN: frames
// sent to the interface's MAC address (not another host's, which a
// bridge floods or a promiscuous interface passes) and of VLAN vlan
// (802.1Q VID 1-4094, the gateway's WANVLAN, whose tag the NIC or the
// kernel took off: the filter reads the skb's VLAN metadata), or with
// vlan 0 untagged and priority-tagged frames (VID 0), so that no host of
// another VLAN on the same wire lowers a path MTU. Their checksum is
// verified by ReadMessage; a packet with extension headers before the
// ICMPv6 one is not taken (routers send none). It needs CAP_NET_RAW.
func ListenLink(ifindex int, vlan uint16) (Source, error) {
	if vlan > 4094 {
		return nil, fmt.Errorf("packet socket: VLAN %d is not a VID (1-4094, or 0 for untagged)", vlan)
	}
	prog, err := bpf.Assemble(linkFilter(vlan))
	if err != nil {
		return nil, err
	}
	filter := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		filter[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	// Protocol 0 until the filter is on: nothing is queued before it.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("packet socket: %w", err)
	}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("packet socket filter: %w", err)
	}
	// Outgoing frames are not handed to it: a socket bound to ETH_P_ALL
	// is also a tap on the interface's transmit path, where the kernel
	// clones every frame it sends there (the host's own traffic, and in
	// owned mode with WANVLAN that of the host's other VLANs on the same
	// NIC) for the filter to drop. Linux 4.20 and later; an older kernel
	// refuses the option (ENOPROTOOPT) and pays that cost, nothing more.
	_ = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
	// ETH_P_ALL: such a socket sees a frame before the kernel's VLAN
	// handling, with its tag in the metadata and its packet type as the
	// destination MAC gave it. One bound to ETH_P_IPV6 gets a frame of a
	// VLAN the host has no device for only after the kernel cleared the
	// tag (net/core/dev.c, __netif_receive_skb_core: PACKET_OTHERHOST),
	// when nothing tells its VLAN any more.
	proto := uint16(unix.ETH_P_ALL)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto<<8 | proto>>8, Ifindex: ifindex}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind packet socket to interface %d: %w", ifindex, err)
	}
	// A nonblocking descriptor: os.File reads it through the runtime's
	// poller, so deadlines work and Close ends a read.
	return linkSource{os.NewFile(uintptr(fd), "toobig-packet")}, nil
}

// linkFilter is ListenLink's socket filter for VLAN vlan (0: untagged or
// priority-tagged): a frame to the interface's own MAC (PACKET_HOST, not
// an outgoing one), IPv6, of the VLAN (an 802.1Q tag), whose next header is ICMPv6 and
// whose ICMPv6 type is "packet too big" (2, RFC 4443 §3.2), kept whole up
// to the longest error a router sends; the rest dropped in the kernel.
// Offsets are from the IPv6 header (a SOCK_DGRAM socket's data).
func linkFilter(vlan uint16) []bpf.Instruction {
	var prog []bpf.Instruction
	var toDrop []int // the jumps to the final drop, patched below
	load := func(in bpf.Instruction) { prog = append(prog, in) }
	dropIf := func(cond bpf.JumpTest, val uint32) {
		toDrop = append(toDrop, len(prog))
		prog = append(prog, bpf.JumpIf{Cond: cond, Val: val})
	}
	load(bpf.LoadExtension{Num: bpf.ExtVLANTagPresent})
	if vlan == 0 {
		// Untagged (skip the tag's tests), or a VID of 0.
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipTrue: 5})
	} else {
		dropIf(bpf.JumpEqual, 0)
	}
	// An 802.1Q tag (an 802.1ad one is a service provider's outer tag,
	// which the XDP program passes as another VLAN's frame).
	load(bpf.LoadExtension{Num: bpf.ExtVLANProto})
	dropIf(bpf.JumpNotEqual, unix.ETH_P_8021Q)
	load(bpf.LoadExtension{Num: bpf.ExtVLANTag})
	load(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0x0fff})
	dropIf(bpf.JumpNotEqual, uint32(vlan))
	load(bpf.LoadExtension{Num: bpf.ExtType})
	dropIf(bpf.JumpNotEqual, unix.PACKET_HOST)
	load(bpf.LoadExtension{Num: bpf.ExtProto})
	dropIf(bpf.JumpNotEqual, unix.ETH_P_IPV6)
	load(bpf.LoadAbsolute{Off: 6, Size: 1}) // next header
	dropIf(bpf.JumpNotEqual, header.ProtoICMPv6)
	load(bpf.LoadAbsolute{Off: header.IPv6Len, Size: 1}) // ICMPv6 type
	dropIf(bpf.JumpNotEqual, 2)
	load(bpf.RetConstant{Val: header.ICMPv6ErrorMaxLen + header.IPv6Len})
	for _, i := range toDrop {
		j := prog[i].(bpf.JumpIf)
		j.SkipTrue = uint8(len(prog) - i - 1)
		prog[i] = j
	}
	return append(prog, bpf.RetConstant{Val: 0})
}

type linkSource struct{ *os.File }

// ReadMessage reads packets until one is an IPv6 packet whose payload is
// a whole ICMPv6 message with a valid checksum, and returns that message.
func (s linkSource) ReadMessage(buf []byte) ([]byte, netip.Addr, error) {
	for {
		n, err := s.Read(buf)
		if err != nil {
			return nil, netip.Addr{}, err
		}
		p := buf[:n]
		if n < header.IPv6Len || p[0]>>4 != header.IPv6Version || p[6] != header.ProtoICMPv6 {
			continue
		}
		l := int(p[4])<<8 | int(p[5])
		if l > n-header.IPv6Len {
			continue // cut by the filter's length: not a whole message
		}
		msg := p[header.IPv6Len : header.IPv6Len+l]
		if header.FoldChecksum(header.Checksum(msg, header.PseudoHeaderChecksumBytes(header.ProtoICMPv6, p[8:24], p[24:40], l))) != 0xffff {
			continue
		}
		return msg, netip.AddrFrom16([16]byte(p[8:24])), nil
	}
}

func (s linkSource) SetReadDeadline(t time.Time) error { return s.File.SetReadDeadline(t) }

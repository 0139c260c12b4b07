package tunnelmtu

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/protocol"
)

// Outer overhead of a transport data message in bytes (whitepaper section
// 5.4.6: a 16-byte header and a 16-byte Poly1305 tag, plus UDP and IP):
// what the WAN MTU must hold above the tunnel MTU for a tunnel packet to
// leave whole, as the kernel's WireGuard computes its default MTU of 1420
// from 1500 − 80.
const (
	OuterOverhead4 = header.IPv4MinLen + header.UDPLen + protocol.TransportMinSize // 60
	OuterOverhead6 = header.IPv6Len + header.UDPLen + protocol.TransportMinSize    // 80
)

// vlanTagLen is the length of an 802.1Q tag in bytes (IEEE 802.1Q §9).
const vlanTagLen = 4

// MTUError is the error of CheckFrames for a tunnel MTU whose packets
// with their outer headers do not fit an AF_XDP frame; its text gives the numbers and the MTU that fits. The gateways'
// Start functions return it wrapped (find it with errors.As); the caller
// can report it at the configuration's MTU key.
type MTUError struct{ msg string }

func (e *MTUError) Error() string { return e.msg }

// tagLen is the bytes an 802.1Q tag of VLAN vid adds to a frame: 4, or 0
// for vid 0 (untagged).
func tagLen(vid uint16) int {
	if vid != 0 {
		return vlanTagLen
	}
	return 0
}

// tagged is the messages' words for a frame's 802.1Q tag.
func tagged(vid uint16) string {
	if vid != 0 {
		return " and the 802.1Q tag"
	}
	return ""
}

// Limits are what a gateway mode takes and sends, which CheckWAN's
// warning names.
type Limits struct {
	// Least is the least tunnel MTU the gateway takes, bytes: the fast
	// path's fastpath.MinMTU (with IPv4 or IPv6 on the WAN alike), or
	// 1280 with an IPv6 tunnel Address (RFC 8200 §5); compat mode's
	// header.IPv4MinMTU.
	Least int
	// MaxFragments is the most IP fragments the gateway cuts one outer
	// packet into (fastpath.MaxFragments, bind.MaxFragments): one that
	// needs more, or that the WAN MTU cannot fragment at all (no room
	// for 8 bytes of data beside its headers), is dropped.
	MaxFragments int
	// Dropped names the counter of such a drop, as wgpio stats shows it
	// ("too_long at the WAN port", "the bind's too_big").
	Dropped string
}

// CheckWAN compares the tunnel MTU plus the outer overhead with wanMTU,
// the MTU in bytes of the WAN interface wanDev, whose frames carry an
// 802.1Q tag of VLAN vid (0: untagged); v4 and v6 say which families the
// WAN has addresses of (the caller's at the moment: at start, and at each
// change of the WAN MTU, since the kernel removes a link's IPv6 addresses
// when its MTU drops below 1280). An outer packet above the WAN MTU
// leaves as IP fragments, as Linux's WireGuard sends it (it sets
// ignore_df and the kernel fragments; both gateway modes do the same:
// package fastpath's wanfrag.go, package bind): nothing is lost, but
// each such packet costs a frame more, the peer's reassembly, and is lost
// on a path that drops fragments; one that needs more fragments than
// lim.MaxFragments, or that the WAN MTU cannot fragment, is dropped
// (lim.Dropped). CheckWAN returns the warning for that (empty if the
// largest tunnel packet fits whole): the numbers (both families' when
// both are over), what becomes of each family's full-size packets, and
// the MTU that fits both, or, when that would be below lim.Least, that
// none fits and the WAN MTU must be raised. A VLAN tag adds 4 bytes to
// the frame but not to the IP packet the MTU bounds (IEEE 802.3 §3.2.7
// allows the tagged frame 4 bytes more; Linux's VLAN devices keep their
// parent's MTU): the message gives the frame a packet would take were it
// sent whole, with the Ethernet header and the tag, and then the fragments
// it is cut into instead (as many as header.IPv4Fragmenter and
// header.IPv6Fragmenter cut, each at most wanMTU bytes).
func CheckWAN(tunnelMTU, wanMTU int, wanDev string, vid uint16, v4, v6 bool, lim Limits) (warn string) {
	over4 := v4 && tunnelMTU+OuterOverhead4 > wanMTU
	over6 := v6 && tunnelMTU+OuterOverhead6 > wanMTU
	if !over4 && !over6 {
		return ""
	}
	fits := wanMTU - OuterOverhead4
	if v6 {
		fits = wanMTU - OuterOverhead6
	}
	fix := fmt.Sprintf("lower MTU in [Interface] to %d or raise the WAN MTU", fits)
	if fits < lim.Least {
		fix = fmt.Sprintf("no tunnel MTU fits (the least is %d, whose packets need a WAN MTU of %d): raise the WAN MTU",
			lim.Least, wanMTU-fits+lim.Least)
	}
	// The first family over names the numbers; with both over, IPv6's
	// sum follows, since the MTU offered is IPv6's.
	family, overhead, also := "IPv6", OuterOverhead6, ""
	if over4 {
		family, overhead = "IPv4", OuterOverhead4
		if over6 {
			also = fmt.Sprintf(", and + %d bytes of outer IPv6 headers = %d", OuterOverhead6, tunnelMTU+OuterOverhead6)
		}
	}
	// What becomes of each family's full-size packets: fragmented, or
	// dropped where the gateway cannot fragment them.
	var fragmented []string
	var counts []int // fragments a packet, by family fragmented
	var dropped []string
	for _, f := range []struct {
		over     bool
		name     string
		v6       bool
		overhead int
	}{{over4, "IPv4", false, OuterOverhead4}, {over6, "IPv6", true, OuterOverhead6}} {
		if !f.over {
			continue
		}
		n := outerFragments(f.v6, tunnelMTU+f.overhead, wanMTU)
		switch {
		case n == 0:
			dropped = append(dropped, fmt.Sprintf("to %s peers cannot be fragmented at this MTU (no room for 8 bytes of data beside the headers)", f.name))
		case n > lim.MaxFragments:
			dropped = append(dropped, fmt.Sprintf("to %s peers would need %d fragments each, more than the %d this gateway cuts a packet into", f.name, n, lim.MaxFragments))
		default:
			fragmented = append(fragmented, f.name)
			counts = append(counts, n)
		}
	}
	fate := ""
	if len(fragmented) > 0 {
		// How many, so that the frame size above reads as what a
		// packet would take whole, not as what is sent.
		count := strconv.Itoa(counts[0])
		if len(counts) == 2 && counts[0] != counts[1] {
			count = fmt.Sprintf("%d (%s) or %d (%s)", counts[0], fragmented[0], counts[1], fragmented[1])
		}
		fate = fmt.Sprintf("full-size tunnel packets to %s peers leave as IP fragments, as Linux's WireGuard sends them: each is cut into %s of at most %d bytes "+
			"(more frames, reassembled by the peer, lost on paths that drop fragments)", strings.Join(fragmented, " and "), count, wanMTU)
	}
	for _, d := range dropped {
		if fate == "" {
			fate = "full-size tunnel packets " + d
		} else {
			fate += "; those " + d
		}
		fate += ": they are dropped (" + lim.Dropped + ")"
	}
	return fmt.Sprintf("tunnel MTU %d + %d bytes of outer %s, UDP and WireGuard headers = %d, more than the MTU %d of WAN %s "+
		"(were it sent whole, a frame of %d bytes with the Ethernet header%s)%s: %s; %s",
		tunnelMTU, overhead, family, tunnelMTU+overhead, wanMTU, wanDev, tunnelMTU+overhead+header.EthernetLen+tagLen(vid), tagged(vid), also,
		fate, fix)
}

// outerFragments is the number of IP fragments of at most mtu bytes an
// outer packet of total bytes (IPv6 when v6) is cut into, as the
// gateways cut it (header.IPv4Fragmenter, header.IPv6Fragmenter), or 0
// when mtu cannot hold a fragment of it (or total is past the 65,535
// bytes of a datagram's length field: CheckFrames refuses such MTUs).
func outerFragments(v6 bool, total, mtu int) int {
	if total-header.IPv6Len > 0xffff || (!v6 && total > 0xffff) {
		return 0
	}
	p := make([]byte, max(total, header.IPv6Len))
	if v6 {
		p[0] = header.IPv6Version << 4
		binary.BigEndian.PutUint16(p[4:6], uint16(total-header.IPv6Len))
		p[6] = header.ProtoUDP
		var f header.IPv6Fragmenter
		if f.Reset(p, mtu, 0) != header.OK {
			return 0
		}
		return f.Count()
	}
	p[0] = header.IPv4Version<<4 | header.IPv4MinLen/4
	binary.BigEndian.PutUint16(p[2:4], uint16(total))
	p[9] = header.ProtoUDP
	var f header.IPv4Fragmenter
	if f.Reset(p, mtu) != header.OK {
		return 0
	}
	return f.Count()
}

// CheckFrames compares the frames the gateway must carry with the longest
// its AF_XDP ports take, maxFrame bytes (afxdp.MaxFrameLen). A tunnel
// packet of tunnelMTU bytes leaves as a frame of the tunnel MTU, the outer
// overhead of its family, the Ethernet header and the tag of the WAN's
// VLAN wanVID (0: untagged), built whole before it is fragmented for the
// WAN MTU: a longer one could never be sent, so its packets would be
// lost without "fragmentation needed" (they are within the tunnel MTU): an
// error (*MTUError), for each family the WAN has addresses of (v4, v6;
// with neither, IPv6's, the longer), IPv4 and IPv6 alike: before, a WAN
// with both was checked for IPv4's alone, and IPv6 peers' full-size
// packets were lost unwarned. A LAN MTU lanMTU (of interface lanDev, VLAN lanVID)
// whose full frames are longer is a warning (empty if none): those frames
// toward the tunnel are dropped by the kernel at the socket
// (xsk_rx_dropped) before the gateway sees them, so their senders get no
// "fragmentation needed" either (path MTU discovery breaks for a jumbo
// LAN), while the LAN's other traffic is untouched. The warning offers
// lowering the LAN MTU, and MSSClamp = auto when clamp says the gateway
// clamps TCP's MSS on request (both modes; compat-mqtun leaves it to the kernel).
func CheckFrames(tunnelMTU, lanMTU int, lanDev string, wanVID, lanVID uint16, v4, v6 bool, maxFrame int, clamp bool) (warn string, err error) {
	// The longest family's frames, IPv6's when the WAN has it (or
	// neither family), name the numbers.
	family, overhead, peers := "IPv4", OuterOverhead4, "IPv4"
	if v6 || !v4 {
		family, overhead, peers = "IPv6", OuterOverhead6, "IPv6"
		if v4 && tunnelMTU+OuterOverhead4+header.EthernetLen+tagLen(wanVID) > maxFrame {
			peers = "IPv4 and IPv6"
		}
	}
	if frame := tunnelMTU + overhead + header.EthernetLen + tagLen(wanVID); frame > maxFrame {
		return "", &MTUError{fmt.Sprintf("tunnel MTU %d makes WAN frames of %d bytes (%d of outer %s, UDP and WireGuard headers, the Ethernet header%s), more than the %d an AF_XDP frame holds: "+
			"full-size tunnel packets to %s peers could never be sent; lower MTU in [Interface] to %d",
			tunnelMTU, frame, overhead, family, tagged(wanVID), maxFrame, peers, tunnelMTU-(frame-maxFrame))}
	}
	if frame := lanMTU + header.EthernetLen + tagLen(lanVID); frame > maxFrame {
		fix := ""
		if clamp {
			fix = ", or set MSSClamp = auto in [WGPIO] so that TCP stays within the tunnel MTU"
		}
		return fmt.Sprintf("LAN %s has MTU %d (frames of %d bytes), more than the %d bytes an AF_XDP frame holds: the kernel drops longer frames toward the tunnel "+
			"(xsk_rx_dropped in wgpio stats) before the gateway sees them, so their senders get no \"fragmentation needed\" and path MTU discovery fails; "+
			"lower the LAN MTU to %d%s",
			lanDev, lanMTU, frame, maxFrame, lanMTU-(frame-maxFrame), fix), nil
	}
	return "", nil
}

// HoldLANMTU is CheckFrames' LAN rule for a LAN MTU that changed while the
// gateway runs: given the interface's new MTU mtu and the largest MTU the
// LAN port's frames hold (maxMTU: afxdp.Port.MaxMTU), it returns the MTU
// the port and the engine take (mtu, or maxMTU when mtu is more) and, when
// held below mtu, the warning to log (empty otherwise): what fails and the
// fix, as CheckFrames' warning at start says it.
func HoldLANMTU(mtu, maxMTU int) (held int, warn string) {
	if mtu <= maxMTU {
		return mtu, ""
	}
	return maxMTU, "LAN MTU changed above what an AF_XDP frame holds: the kernel drops longer frames toward the tunnel (xsk_rx_dropped in wgpio stats) before the gateway sees them, " +
		"so their senders get no fragmentation needed, and decrypted packets are held to the largest MTU a frame holds; lower the LAN MTU to it"
}

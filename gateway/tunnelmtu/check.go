package tunnelmtu

import (
	"fmt"

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

// CheckWAN compares the tunnel MTU plus the outer overhead with wanMTU,
// the MTU in bytes of the WAN interface wanDev, whose frames carry an
// 802.1Q tag of VLAN vid (0: untagged); v4 and v6 say which families the
// WAN has addresses of. An outer packet above the WAN MTU leaves as IP
// fragments, as Linux's WireGuard sends it (it sets ignore_df and the
// kernel fragments; both gateway modes do the same: package fastpath's
// wanfrag.go, package bind): nothing is lost, but each such packet costs
// a frame more, the peer's reassembly, and is lost on a path that drops
// fragments. CheckWAN returns the warning for that (empty if the largest
// tunnel packet fits whole): the numbers (both families' when both are
// fragmented), the families whose full-size packets are fragmented, and
// the MTU that fits both, or, when that would be below the least tunnel
// MTU (header.IPv4MinMTU, the configuration's least), that none fits and
// the WAN MTU must be raised. A VLAN tag adds
// 4 bytes to the frame but not to the IP packet the MTU bounds (IEEE
// 802.3 §3.2.7 allows the tagged frame 4 bytes more; Linux's VLAN devices
// keep their parent's MTU): the messages give the frame size with the tag.
func CheckWAN(tunnelMTU, wanMTU int, wanDev string, vid uint16, v4, v6 bool) (warn string) {
	return CheckWANLeast(tunnelMTU, wanMTU, wanDev, vid, v4, v6, header.IPv4MinMTU)
}

// CheckWANLeast is CheckWAN for a gateway that takes no tunnel MTU below
// least (bytes): the fast path's is fastpath.MinMTU, or 1280 with an IPv6
// WAN address or tunnel Address (RFC 8200 §5). The MTU the warning offers
// is never below it: where the one that fits whole would be, the warning
// says that none fits and to raise the WAN MTU (it offered an MTU the
// configuration or the start then refused).
func CheckWANLeast(tunnelMTU, wanMTU int, wanDev string, vid uint16, v4, v6 bool, least int) (warn string) {
	fits := wanMTU - OuterOverhead4
	if v6 {
		fits = wanMTU - OuterOverhead6
	}
	fix := fmt.Sprintf("lower MTU in [Interface] to %d or raise the WAN MTU", fits)
	if fits < least {
		fix = fmt.Sprintf("no tunnel MTU fits (the least is %d, whose packets need a WAN MTU of %d): raise the WAN MTU",
			least, wanMTU-fits+least)
	}
	say := func(family string, overhead int, peers, also string) string {
		return fmt.Sprintf("tunnel MTU %d + %d bytes of outer %s, UDP and WireGuard headers = %d, more than the MTU %d of WAN %s (frames of %d bytes with the Ethernet header%s)%s: "+
			"full-size tunnel packets to %s peers leave as IP fragments, as Linux's WireGuard sends them (a frame more each, reassembled by the peer, lost on paths that drop fragments); %s",
			tunnelMTU, overhead, family, tunnelMTU+overhead, wanMTU, wanDev, tunnelMTU+overhead+header.EthernetLen+tagLen(vid), tagged(vid), also,
			peers, fix)
	}
	switch {
	case v4 && tunnelMTU+OuterOverhead4 > wanMTU && v6:
		return say("IPv4", OuterOverhead4, "IPv4 and IPv6",
			fmt.Sprintf(", and + %d bytes of outer IPv6 headers = %d", OuterOverhead6, tunnelMTU+OuterOverhead6))
	case v4 && tunnelMTU+OuterOverhead4 > wanMTU:
		return say("IPv4", OuterOverhead4, "IPv4", "")
	case v6 && tunnelMTU+OuterOverhead6 > wanMTU:
		return say("IPv6", OuterOverhead6, "IPv6", "")
	}
	return ""
}

// CheckFrames compares the frames the gateway must carry with the longest
// its AF_XDP ports take, maxFrame bytes (afxdp.MaxFrameLen). A tunnel
// packet of tunnelMTU bytes leaves as a frame of the tunnel MTU, the outer
// overhead (of IPv4 when the WAN has an IPv4 address, v4: CheckWAN's
// rule), the Ethernet header and the tag of the WAN's VLAN wanVID (0:
// untagged): a longer one could never be sent, so its packets would be
// lost without "fragmentation needed" (they are within the tunnel MTU): an
// error (*MTUError). A LAN MTU lanMTU (of interface lanDev, VLAN lanVID)
// whose full frames are longer is a warning (empty if none): those frames
// toward the tunnel are dropped by the kernel at the socket
// (xsk_rx_dropped) before the gateway sees them, so their senders get no
// "fragmentation needed" either (path MTU discovery breaks for a jumbo
// LAN), while the LAN's other traffic is untouched. The warning offers
// lowering the LAN MTU, and MSSClamp = auto when clamp says the gateway
// clamps TCP's MSS on request (both modes; compat-mqtun leaves it to the kernel).
func CheckFrames(tunnelMTU, lanMTU int, lanDev string, wanVID, lanVID uint16, v4 bool, maxFrame int, clamp bool) (warn string, err error) {
	overhead := OuterOverhead6
	if v4 {
		overhead = OuterOverhead4
	}
	if frame := tunnelMTU + overhead + header.EthernetLen + tagLen(wanVID); frame > maxFrame {
		return "", &MTUError{fmt.Sprintf("tunnel MTU %d makes WAN frames of %d bytes (%d of outer headers, the Ethernet header%s), more than the %d an AF_XDP frame holds: "+
			"full-size tunnel packets could never be sent; lower MTU in [Interface] to %d",
			tunnelMTU, frame, overhead, tagged(wanVID), maxFrame, tunnelMTU-(frame-maxFrame))}
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

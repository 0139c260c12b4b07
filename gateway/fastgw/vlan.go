package fastgw

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/header"
)

// Outer overhead of a transport data message in bytes (whitepaper section
// 5.4.6: a 16-byte header and a 16-byte Poly1305 tag, plus UDP and IP):
// what the WAN MTU must hold above the tunnel MTU, as the kernel's
// WireGuard computes its default MTU of 1420 from 1500 − 80.
const (
	OuterOverhead4 = header.IPv4MinLen + header.UDPLen + 16 + 16 // 60
	OuterOverhead6 = header.IPv6Len + header.UDPLen + 16 + 16    // 80
)

// side is one of the gateway's two sides as the configuration names it,
// resolved to the trunk the XDP program and the sockets run on and the
// VLAN it takes there.
type side struct {
	what  string // "WAN" or "LAN"
	name  string // as configured
	trunk string // the interface AF_XDP opens
	vid   uint16 // 802.1Q VLAN on the trunk, 0 untagged
	// addrDev is the interface whose addresses, routes and neighbours are
	// the side's: the kernel's VLAN device for vid when there is one,
	// else the trunk.
	addrDev string
}

// resolveSide works out a side: name may be a kernel VLAN device
// ("eth0.100": its parent is the trunk, its VID the VLAN), and vid a
// VLAN of the trunk name. In shared address mode a VLAN needs the
// kernel's VLAN device, which holds the address and answers ARP/NDP (the
// XDP program leaves those to the kernel); owned mode needs none.
func resolveSide(h *netlink.Handle, what, name string, vid uint16, owned bool) (side, error) {
	s := side{what: what, name: name, trunk: name, vid: vid, addrDev: name}
	l, err := h.LinkByName(name)
	if err != nil {
		return s, fmt.Errorf("interface %q: %w (list them with `ip link`)", name, afxdp.ErrNoSuchInterface)
	}
	if v, ok := l.(*netlink.Vlan); ok {
		if v.VlanProtocol == netlink.VLAN_PROTOCOL_8021AD {
			return s, fmt.Errorf("%s %s is an 802.1ad VLAN device; wgpio takes one 802.1Q tag: name its parent and set %sVLAN", what, name, what)
		}
		if vid != 0 && int(vid) != v.VlanId {
			return s, fmt.Errorf("%s %s is VLAN %d, but %sVLAN says %d", what, name, v.VlanId, what, vid)
		}
		parent, err := h.LinkByIndex(v.ParentIndex)
		if err != nil {
			return s, fmt.Errorf("%s %s: its parent interface (index %d): %w", what, name, v.ParentIndex, err)
		}
		s.trunk, s.vid = parent.Attrs().Name, uint16(v.VlanId)
		if parent.Attrs().HardwareAddr.String() != v.HardwareAddr.String() {
			return s, fmt.Errorf("%s %s has MAC %s, its parent %s has %s: the XDP program on %s matches the parent's; give both the same MAC (ip link set dev %s address %s)",
				what, name, v.HardwareAddr, s.trunk, parent.Attrs().HardwareAddr, s.trunk, name, parent.Attrs().HardwareAddr)
		}
		return s, nil
	}
	if vid == 0 {
		return s, nil
	}
	links, err := h.LinkList()
	if err != nil {
		return s, fmt.Errorf("list interfaces: %w", err)
	}
	for _, x := range links {
		if v, ok := x.(*netlink.Vlan); ok && v.ParentIndex == l.Attrs().Index && v.VlanId == int(vid) && v.VlanProtocol != netlink.VLAN_PROTOCOL_8021AD {
			s.addrDev = v.Name
			return s, nil
		}
	}
	if !owned {
		return s, fmt.Errorf("%sVLAN %d on %s in shared address mode needs the kernel's VLAN device for it, which holds the address and answers ARP/NDP: "+
			"ip link add link %s name %s.%d type vlan id %d (module 8021q), or use AddressMode = owned", what, vid, name, name, name, vid, vid)
	}
	return s, nil
}

// MTUError is Start's error for a tunnel MTU (Config.MTU) whose packets
// with their outer headers do not fit the WAN MTU (mtuCheck) or an AF_XDP
// frame (frameCheck); its text gives the numbers and the MTU that fits.
// The caller can report it at the configuration's MTU key.
type MTUError struct{ msg string }

func (e *MTUError) Error() string { return e.msg }

// mtuCheck compares the tunnel MTU plus the outer overhead with the MTU of
// the WAN. An outer packet above it would not leave the WAN (the fast path
// builds outer packets itself; nothing fragments them on this host), so:
// an error when even the smaller overhead of the families the WAN has
// addresses of does not fit, and a warning (empty if none) when only the
// IPv6 one does not. A VLAN tag adds 4 bytes to the frame but not to the
// IP packet the MTU bounds (IEEE 802.3 §3.2.7 allows the tagged frame
// 4 bytes more; Linux's VLAN devices keep their parent's MTU): the
// messages give the frame size with the tag.
func mtuCheck(tunnelMTU, wanMTU int, wanDev string, vid uint16, v4, v6 bool) (warn string, err error) {
	tag := 0
	if vid != 0 {
		tag = 4
	}
	say := func(family string, overhead int) string {
		return fmt.Sprintf("tunnel MTU %d + %d bytes of outer %s, UDP and WireGuard headers = %d, more than the MTU %d of WAN %s (frames of %d bytes with the Ethernet header%s): "+
			"full-size tunnel packets to %s peers cannot leave; lower MTU in [Interface] to %d or raise the WAN MTU",
			tunnelMTU, overhead, family, tunnelMTU+overhead, wanMTU, wanDev, tunnelMTU+overhead+header.EthernetLen+tag, map[bool]string{true: " and the 802.1Q tag", false: ""}[tag != 0],
			family, wanMTU-overhead)
	}
	switch {
	case v4 && tunnelMTU+OuterOverhead4 > wanMTU:
		return "", &MTUError{say("IPv4", OuterOverhead4)}
	case !v4 && v6 && tunnelMTU+OuterOverhead6 > wanMTU:
		return "", &MTUError{say("IPv6", OuterOverhead6)}
	case v4 && v6 && tunnelMTU+OuterOverhead6 > wanMTU:
		return say("IPv6", OuterOverhead6), nil
	}
	return "", nil
}

// frameCheck compares the frames the gateway must carry with the longest
// its AF_XDP ports take, maxFrame bytes (afxdp.MaxFrameLen). A tunnel
// packet of tunnelMTU bytes leaves as a frame of the tunnel MTU, the outer
// overhead (of IPv4 when the WAN has an IPv4 address, mtuCheck's rule),
// the Ethernet header and the WAN's tag: a longer one could never be sent,
// so its packets would be lost without "fragmentation needed" (they are
// within the tunnel MTU): an error. A LAN MTU whose full frames are longer
// is a warning: those frames toward the tunnel are dropped by the kernel
// at the socket (xsk_rx_dropped) before the fast path sees them, so their
// senders get no "fragmentation needed" either (path MTU discovery breaks
// for a jumbo LAN), while the LAN's other traffic is untouched.
func frameCheck(tunnelMTU, lanMTU int, lanDev string, wanVID, lanVID uint16, v4 bool, maxFrame int) (warn string, err error) {
	tagLen := func(vid uint16) int {
		if vid != 0 {
			return 4
		}
		return 0
	}
	overhead := OuterOverhead6
	if v4 {
		overhead = OuterOverhead4
	}
	if frame := tunnelMTU + overhead + header.EthernetLen + tagLen(wanVID); frame > maxFrame {
		return "", &MTUError{msg: fmt.Sprintf("tunnel MTU %d makes WAN frames of %d bytes (%d of outer headers, the Ethernet header%s), more than the %d an AF_XDP frame holds: "+
			"full-size tunnel packets could never be sent; lower MTU in [Interface] to %d",
			tunnelMTU, frame, overhead, map[bool]string{true: " and the 802.1Q tag", false: ""}[wanVID != 0], maxFrame, tunnelMTU-(frame-maxFrame))}
	}
	if frame := lanMTU + header.EthernetLen + tagLen(lanVID); frame > maxFrame {
		return fmt.Sprintf("LAN %s has MTU %d (frames of %d bytes), more than the %d bytes an AF_XDP frame holds: the kernel drops longer frames toward the tunnel "+
			"(xsk_rx_dropped in wgpio stats) before the gateway sees them, so their senders get no \"fragmentation needed\" and path MTU discovery fails; "+
			"lower the LAN MTU to %d, or set MSSClamp = auto in [WGPIO] so that TCP stays within the tunnel MTU",
			lanDev, lanMTU, frame, maxFrame, lanMTU-(frame-maxFrame)), nil
	}
	return "", nil
}

// watchWANMTU logs, at warning level, every change of the WAN's MTU (the
// trunk's or its VLAN device's) that mtuCheck finds wrong, until done is
// closed. The gateway keeps running: the operator is told the numbers.
// mtus maps each watched interface index to its MTU at start (mtuCheck
// passed it); a link update that leaves the MTU as it was (the XDP
// program detached at Close, a carrier change, an alias) logs nothing,
// nor does the subscription's end when done is closed.
func (g *Gateway) watchWANMTU(ns netns.NsHandle, s side, mtus map[int]int, v4, v6 bool, done <-chan struct{}) error {
	ch := make(chan netlink.LinkUpdate, 16)
	opts := netlink.LinkSubscribeOptions{ErrorCallback: func(err error) {
		select {
		case <-done: // closing the subscription fails its pending receive
		default:
			g.log.Warn("following the WAN MTU", "err", err)
		}
	}}
	if ns.IsOpen() {
		opts.Namespace = &ns
	}
	if err := netlink.LinkSubscribeWithOptions(ch, done, opts); err != nil {
		return fmt.Errorf("follow the WAN MTU: %w", err)
	}
	go func() {
		for u := range ch {
			a := u.Attrs()
			if mtu, watched := mtus[a.Index]; !watched || mtu == a.MTU {
				continue
			}
			mtus[a.Index] = a.MTU
			warn, err := mtuCheck(g.cfg.MTU, a.MTU, a.Name, s.vid, v4, v6)
			switch {
			case err != nil:
				g.log.Warn("WAN MTU changed: tunnel packets are lost", "interface", a.Name, "mtu", a.MTU, "problem", err.Error())
			case warn != "":
				g.log.Warn("WAN MTU changed", "interface", a.Name, "mtu", a.MTU, "problem", warn)
			default:
				g.log.Info("WAN MTU changed; the tunnel MTU fits", "interface", a.Name, "mtu", a.MTU, "tunnel_mtu", g.cfg.MTU)
			}
		}
	}()
	return nil
}

//go:build linux

package fastgw

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/gateway/tunnelmtu"
	"github.com/wgpio/wgpio/internal/nldump"
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

// SettingError is a Start error that one setting of Config caused: Key
// names it as the [WGPIO] section of wgpio's configuration file does
// ("WAN", "LAN", "WANVLAN", "LANVLAN"), or "ListenPort" ([Interface]: a
// port another socket of the host holds), so that a caller can point at
// the line that set it. Err says what is wrong and how to fix it.
type SettingError struct {
	Key string
	Err error
}

func (e *SettingError) Error() string { return e.Err.Error() }
func (e *SettingError) Unwrap() error { return e.Err }

// resolveSide works out a side: name may be a kernel VLAN device
// ("eth0.100": its parent is the trunk, its VID the VLAN), and vid a
// VLAN of the trunk name. In shared address mode a VLAN needs the
// kernel's VLAN device, which holds the address and answers ARP/NDP (the
// XDP program leaves those to the kernel); owned mode needs none.
func resolveSide(h *netlink.Handle, what, name string, vid uint16, owned bool) (side, error) {
	// An error of the configuration names its setting: the side's
	// interface (what) or its VLAN (what+"VLAN").
	setting := func(key, format string, args ...any) error {
		return &SettingError{Key: key, Err: fmt.Errorf(format, args...)}
	}
	s := side{what: what, name: name, trunk: name, vid: vid, addrDev: name}
	l, err := h.LinkByName(name)
	if err != nil {
		return s, setting(what, "interface %q: %w (list them with `ip link`)", name, afxdp.ErrNoSuchInterface)
	}
	if err := afxdp.CheckEthernet(l); err != nil {
		return s, setting(what, "%s: %w", what, err)
	}
	if v, ok := l.(*netlink.Vlan); ok {
		if v.VlanProtocol == netlink.VLAN_PROTOCOL_8021AD {
			return s, setting(what, "%s %s is an 802.1ad VLAN device; wgpio takes one 802.1Q tag: name its parent and set %sVLAN", what, name, what)
		}
		if vid != 0 && int(vid) != v.VlanId {
			return s, setting(what+"VLAN", "%s %s is VLAN %d, but %sVLAN says %d", what, name, v.VlanId, what, vid)
		}
		parent, err := h.LinkByIndex(v.ParentIndex)
		if err != nil {
			return s, fmt.Errorf("%s %s: its parent interface (index %d): %w", what, name, v.ParentIndex, err)
		}
		s.trunk, s.vid = parent.Attrs().Name, uint16(v.VlanId)
		return s, sameMAC(what, what, v, parent)
	}
	if vid == 0 {
		return s, nil
	}
	links, err := nldump.Retry(h.LinkList)
	if err != nil {
		return s, fmt.Errorf("list interfaces: %w", err)
	}
	if v := VLANDevice(links, l.Attrs().Index, vid); v != nil {
		s.addrDev = v.Name
		return s, sameMAC(what, what+"VLAN", v, l)
	}
	if !owned {
		return s, setting(what+"VLAN", "%sVLAN %d on %s in shared address mode needs the kernel's VLAN device for it, which holds the address and answers ARP/NDP: "+
			"ip link add link %s name %s.%d type vlan id %d (module 8021q), or use AddressMode = owned", what, vid, name, name, name, vid, vid)
	}
	return s, nil
}

// sameMAC is the error of a kernel VLAN device v whose MAC is not its
// parent's (the trunk the port opens), as a SettingError of key: the
// kernel answers ARP/NDP for v's address with v's MAC, so that the peers'
// or the LAN hosts' frames come to it, and the XDP program on the trunk
// takes only frames to the trunk's MAC (or a group address): every one
// would go to the kernel. Linux gives a VLAN device its parent's MAC
// unless told otherwise.
func sameMAC(what, key string, v *netlink.Vlan, parent netlink.Link) error {
	pm := parent.Attrs().HardwareAddr
	if pm.String() == v.HardwareAddr.String() {
		return nil
	}
	return &SettingError{Key: key, Err: fmt.Errorf("%s: VLAN device %s has MAC %s, its parent %s has %s: the XDP program on %s takes frames to the parent's; give both the same MAC (ip link set dev %s address %s)",
		what, v.Name, v.HardwareAddr, parent.Attrs().Name, pm, parent.Attrs().Name, v.Name, pm)}
}

// watchWANMTU logs every change of the WAN's MTU (the trunk's or its
// VLAN device's) until done is closed: at warning level with
// tunnelmtu.CheckWAN's numbers when full-size tunnel packets no longer
// fit whole, otherwise at info level. Each change also bounds the WAN
// port and the outer packets (setWANMTU): a tunnel packet longer than the
// least MTU of the watched interfaces leaves as IP fragments
// (outer_fragmented), as Linux's WireGuard sends it, where it was once
// sent whole in a frame the link does not carry (a NIC or switch drops it
// without a word) and then dropped as the port's too_long. The check is
// against that least MTU, naming its interface, not against the MTU of
// the interface that changed: Linux lowers a VLAN device's MTU with its
// parent's but never raises it, so a trunk raised back leaves the VLAN
// device, and the port, at the lowered MTU.
// mtus maps each watched interface index to its MTU at start
// (tunnelmtu.CheckWAN passed the least of them); a link update that
// leaves the MTU as it was (the XDP program detached at Close, a carrier
// change, an alias) logs nothing, nor does the subscription's end when
// done is closed. Each watched interface going down or up is logged
// (linkStates). The outer families checked are those of the WAN's
// addresses at each change (Config.wanFamilies, re-read): the kernel
// removes a link's IPv6 addresses when its MTU drops below 1280, and
// they were those of start, so that IPv6 peers were still named. The
// interfaces are the indexes', which a rename keeps, and named as last
// seen.
func (g *Gateway) watchWANMTU(ns netns.NsHandle, s side, mtus map[int]int, done <-chan struct{}) error {
	indexes := slices.Sorted(maps.Keys(mtus))
	names := map[int]string{} // each watched index's name, as last read
	states := g.linkStates("WAN")
	var v4, v6 bool // the WAN's outer families, as last read
	// The address device read by its name once, at start, then by its
	// index, which a rename keeps (named as last seen in the messages).
	addrIndex := g.wanIfindex // as Start read it
	if wl, err := readLink(g.nlHandle, s.addrDev); err == nil {
		v4, v6 = g.cfg.wanFamilies(wl)
		addrIndex = wl.index
	}
	addrName := func() string { return cmp.Or(names[addrIndex], s.addrDev) }
	return g.followLinks(ns, done, "WAN", indexes, func(a netlink.LinkAttrs, _ bool) {
		if _, watched := mtus[a.Index]; watched {
			states.Note(a)
			names[a.Index] = a.Name
		}
		if mtu, watched := mtus[a.Index]; !watched || mtu == a.MTU {
			return
		}
		mtus[a.Index] = a.MTU
		// The least MTU bounds the port; the interface that changed
		// names it when it is the least.
		least, leastDev := a.MTU, a.Name
		for _, i := range indexes {
			if mtus[i] < least {
				least, leastDev = mtus[i], names[i]
				if leastDev == "" {
					leastDev = fmt.Sprintf("index %d", i)
				}
			}
		}
		g.setWANMTU(a.Name, least)
		if wl, err := readLinkIndex(g.nlHandle, addrIndex, addrName()); err == nil {
			v4, v6 = g.cfg.wanFamilies(wl)
		} else {
			g.log.Warn("re-read the WAN interface's addresses after an MTU change: checking the families of before", "err", err)
		}
		warn := tunnelmtu.CheckWAN(g.cfg.MTU, least, leastDev, s.vid, v4, v6, g.cfg.wanLimits())
		attrs := []any{"interface", a.Name, "mtu", a.MTU}
		if leastDev != a.Name {
			attrs = append(attrs, "wan_mtu", least, "wan_mtu_of", leastDev)
		}
		if warn != "" {
			g.log.Warn("WAN MTU changed", append(attrs, "problem", warn, "counted", "outer_fragmented in wgpio stats")...)
		} else {
			g.log.Info("WAN MTU changed; the tunnel MTU fits", append(attrs, "tunnel_mtu", g.cfg.MTU)...)
		}
	})
}

// setWANMTU makes mtu, the least MTU of the WAN's watched interfaces (the
// trunk and its VLAN device), the WAN port's (afxdp.Port.SetMTU: the
// longest frame Transmit sends, one 802.1Q tag beyond it allowed) and the
// engine's (fastpath.Engine.SetWANMTU), held to what a frame holds
// (MaxMTU). The fast path builds tunnel packets of the tunnel MTU
// whatever the WAN's, and sends those over the engine's MTU as IP
// fragments; the port's bound counts (too_long) anything else too long.
// Called at start (watchMTU) and by the WAN follower.
func (g *Gateway) setWANMTU(name string, mtu int) {
	if g.wan == nil {
		return
	}
	mtu = min(mtu, g.wan.MaxMTU())
	if g.engine != nil {
		g.engine.SetWANMTU(mtu)
	}
	if mtu == g.wan.MTU() {
		return
	}
	if err := g.wan.SetMTU(mtu); err != nil {
		g.log.Warn("WAN MTU change not taken by the WAN port", "interface", name, "mtu", mtu, "port_mtu", g.wan.MTU(), "err", err)
	}
}

// VLANDevice returns, of links, the kernel's 802.1Q VLAN device of VLAN
// vid on the interface of index parent (the device that holds a VLAN's
// address in shared address mode), or nil when there is none.
func VLANDevice(links []netlink.Link, parent int, vid uint16) *netlink.Vlan {
	for _, x := range links {
		if v, ok := x.(*netlink.Vlan); ok && v.ParentIndex == parent && v.VlanId == int(vid) && v.VlanProtocol != netlink.VLAN_PROTOCOL_8021AD {
			return v
		}
	}
	return nil
}

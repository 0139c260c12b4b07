//go:build linux

package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/internal/nldump"
	"github.com/wgpio/wgpio/internal/srcaddr"
)

// ifAddr is an address of one of the host's interfaces, with the length
// of its subnet.
type ifAddr struct {
	dev    string
	prefix netip.Prefix
}

// addressOverlaps lists, as warnings at the file's Address line, the
// tunnel addresses (tunnel: [Interface] Address, given to the tunnel's
// interface, whose subnet the kernel then routes into it, as wg-quick's
// `ip address add`) whose subnet overlaps the subnet of an address in
// others (the host's other interfaces, the addresses owned mode takes).
// The kernel then holds two routes to the overlap, and the host's traffic
// for it follows whichever comes first: into the tunnel, where the
// gateway drops what no peer's AllowedIPs holds, once the other
// interface's link went down and up. Host addresses (a /32, a /128) make
// no subnet route and are left out, on either side.
func addressOverlaps(file string, lines map[string]int, tunnel []netip.Prefix, others []ifAddr) []config.Warning {
	var out []config.Warning
	for _, t := range tunnel {
		if t.IsSingleIP() {
			continue
		}
		for _, o := range others {
			if o.prefix.IsSingleIP() || !t.Masked().Overlaps(o.prefix.Masked()) {
				continue
			}
			out = append(out, config.Warning{File: file, Line: lines["Address"], Key: "Address", Msg: fmt.Sprintf(
				"%s overlaps the subnet of %s (%s): the kernel has two routes to %s, and whenever the tunnel's comes first "+
					"(after %s goes down and up) the host's traffic for that subnet goes into the tunnel, where no peer takes it; "+
					"give the tunnel a subnet of its own (as in 10.8.0.1/24)",
				t, o.dev, o.prefix, smaller(t, o.prefix).Masked(), o.dev)})
		}
	}
	return out
}

// smaller returns whichever of a and b is the longer prefix (the overlap
// of two overlapping prefixes).
func smaller(a, b netip.Prefix) netip.Prefix {
	if a.Bits() >= b.Bits() {
		return a
	}
	return b
}

// warnAddressOverlaps logs addressOverlaps' warnings for the file's
// tunnel addresses against the addresses of this namespace's other
// interfaces (not loopback, nor the gateway's own tunnel interface, tun,
// when it is left from an earlier run) and, in owned address mode, the
// WANAddress and LANAddress the gateway takes. A failure to read the
// interfaces is logged, not fatal: the warning is advice.
func warnAddressOverlaps(log *slog.Logger, f *config.File, w config.WGPIO, tun string) {
	if len(f.Interface.Addresses) == 0 {
		return
	}
	var others []ifAddr
	if w.AddressMode == config.AddressOwned {
		for _, x := range []struct {
			key string
			p   netip.Prefix
		}{{"WANAddress", w.WANAddress}, {"LANAddress", w.LANAddress}} {
			if x.p.IsValid() {
				others = append(others, ifAddr{dev: x.key, prefix: x.p})
			}
		}
	}
	links, err := nldump.Retry(netlink.LinkList)
	if err == nil {
		for _, l := range links {
			a := l.Attrs()
			if a.Name == tun || a.Flags&net.FlagLoopback != 0 {
				continue
			}
			addrs, aerr := nldump.Retry(func() ([]netlink.Addr, error) { return netlink.AddrList(l, netlink.FAMILY_ALL) })
			if aerr != nil {
				err = aerr
				continue
			}
			for _, ad := range addrs {
				if p, ok := srcaddr.Prefix(ad); ok && p.Addr().IsGlobalUnicast() {
					others = append(others, ifAddr{dev: a.Name, prefix: p})
				}
			}
		}
	}
	if err != nil {
		log.Warn("could not read the host's addresses to compare with Address", "err", err)
	}
	for _, warning := range addressOverlaps(f.Name, f.Interface.Lines, f.Interface.Addresses, others) {
		log.Warn("config", "warning", warning.String())
	}
}

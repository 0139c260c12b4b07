//go:build linux

package fastgw

import (
	"net/netip"
	"slices"

	"github.com/wgpio/wgpio/internal/toobig"
)

// openPathMTU follows the path MTU toward IPv6 endpoints (package
// internal/toobig): it reads ICMPv6 "packet too big" about our outer
// packets and sets the engine's path MTUs (fastpath.Engine.SetPathMTU),
// which then fragments the outer packets toward such an endpoint as
// Linux's kernel fragments its WireGuard's. In shared address mode the
// errors reach the kernel, which owns the WAN address they are sent to,
// and a raw ICMPv6 socket of the gateway's namespace reads them; in owned
// address mode the kernel has no such address and drops them, so a packet
// socket on the WAN interface (index) reads them as the XDP program
// passes them. On failure (no CAP_NET_RAW, IPv6 disabled) it logs a
// warning and the gateway runs without it.
func (g *Gateway) openPathMTU(index int) {
	var src toobig.Source
	err := g.inNamespace(func() (err error) {
		if g.cfg.Owned {
			src, err = toobig.ListenLink(index, g.cfg.WANVLAN)
		} else {
			src, err = toobig.ListenICMP()
		}
		return err
	})
	if err != nil {
		g.log.Warn("ICMPv6 packet too big will not be read: outer packets toward an IPv6 endpoint behind a link of a smaller MTU than the WAN's are lost (lower MTU so that MTU + 80 fits that path)", "err", err)
		return
	}
	g.pmtu = toobig.Follow(toobig.Config{Source: src, Setter: g.engine, Ours: g.ownOuter, WANMTU: g.wan.MTU, Log: g.log})
}

// ownOuter reports whether an outer packet from src and UDP port sport
// is one of ours: from one of the WAN addresses and a port the engine
// sends from now (a wg set listen-port moves it from the
// configuration's).
func (g *Gateway) ownOuter(src netip.Addr, sport uint16) bool {
	port, _, _ := g.engine.WAN()
	g.wanMu.Lock()
	defer g.wanMu.Unlock()
	return port != 0 && sport >= port && int(sport) < int(port)+int(max(g.cfg.SourcePorts, 1)) &&
		slices.Contains(g.wanAddrs(), src)
}

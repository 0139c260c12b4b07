//go:build linux

package compatgw

import "github.com/wgpio/wgpio/internal/toobig"

// followPathMTU follows the path MTU toward IPv6 endpoints as fast-path
// mode does (package internal/toobig): a raw ICMPv6 socket of the
// gateway's namespace reads the "packet too big" a router on the way
// sends about the bind's datagrams (the WAN's XDP program passes them to
// the kernel, which owns the WAN addresses), and the bind sends its
// datagrams toward that endpoint as IPv6 fragments within the path MTU
// (bind.Bind.SetPathMTU), as Linux's kernel fragments its WireGuard's,
// where before every full-size datagram over the smaller link was lost
// (IPv6 routers do not fragment). An error is taken only when it quotes
// a datagram of the bind's (from one of its addresses and its listen port
// of the moment, bind.Bind.Sends). On failure (no CAP_NET_RAW, IPv6
// disabled) it logs a warning and the gateway runs without it. Closed at
// Close.
func (g *Gateway) followPathMTU() {
	src, err := toobig.ListenICMP()
	if err != nil {
		g.log.Warn("ICMPv6 packet too big will not be read: datagrams toward an IPv6 endpoint behind a link of a smaller MTU than the WAN's are lost (lower MTU so that MTU + 80 fits that path)", "err", err)
		return
	}
	f := toobig.Follow(toobig.Config{Source: src, Setter: g.bind, Ours: g.bind.Sends, WANMTU: g.wan.MTU, Log: g.log})
	g.closers = append(g.closers, func() error { f.Close(); return nil })
}

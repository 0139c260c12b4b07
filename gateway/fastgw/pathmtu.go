//go:build linux

package fastgw

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"slices"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/header"
)

// The path MTU toward IPv6 endpoints.
//
// The fast path builds and sends its outer packets itself, so the path MTU
// the kernel learns toward an endpoint from a router's ICMPv6 "packet too
// big" (which reaches the kernel: the WAN's XDP program passes what is not
// WireGuard) never bounded them: IPv6 routers do not fragment (RFC 8200
// §5), and every outer packet over a smaller link on the way was lost, for
// good (with IPv6 endpoints and the default tunnel MTU, 1,500-byte outer
// packets, a peer behind a PPPoE line got no full-size packet). Linux's
// WireGuard sends through the kernel's IPv6 output, which fragments at the
// learnt path MTU (ignore_df), so it loses only the packet the router
// answered. followPathMTU reads those errors on a raw ICMPv6 socket of the
// gateway's namespace (shared address mode: the kernel owns the WAN
// address they are sent to) and gives the engine the path MTU of each
// endpoint they name (fastpath.Engine.SetPathMTU), which then fragments
// the outer packets toward it as the kernel would. An error is taken only
// when the packet it quotes is one of ours (from one of the WAN
// addresses and the WireGuard source ports, UDP, whole or a first
// fragment), and an endpoint's path MTU is forgotten pathMTUExpiry after
// the last error that set it, as Linux expires it
// (net.ipv6.route.mtu_expires), so that a path that grew is used whole
// again. IPv4 needs none of this: our outer IPv4 header has DF clear, and
// routers fragment it.

// pathMTUExpiry is how long an endpoint's path MTU is kept after the last
// "packet too big" that set it: Linux's net.ipv6.route.mtu_expires.
const pathMTUExpiry = 10 * time.Minute

// icmpv6HeaderLen is the length of an ICMPv6 error's header, type to the
// MTU (RFC 4443 §3.2), before the quoted packet.
const icmpv6HeaderLen = 8

// pathMTUSweep is how often followPathMTU looks for expired path MTUs.
const pathMTUSweep = 30 * time.Second

// openPathMTU opens the raw ICMPv6 socket followPathMTU reads, in the
// gateway's namespace, passing "packet too big" alone (ICMP6_FILTER). On
// failure (no CAP_NET_RAW, IPv6 disabled) it logs a warning and the
// gateway runs without it.
func (g *Gateway) openPathMTU() {
	var c *icmp.PacketConn
	err := g.inNamespace(func() (err error) {
		c, err = icmp.ListenPacket("ip6:ipv6-icmp", "::")
		return err
	})
	if err == nil {
		var f ipv6.ICMPFilter
		f.SetAll(true)
		f.Accept(ipv6.ICMPTypePacketTooBig)
		if err = c.IPv6PacketConn().SetICMPFilter(&f); err != nil {
			c.Close()
		}
	}
	if err != nil {
		g.log.Warn("ICMPv6 packet too big will not be read: outer packets toward an IPv6 endpoint behind a link of a smaller MTU than the WAN's are lost (lower MTU so that MTU + 80 fits that path)", "err", err)
		return
	}
	g.pmtuConn = c
	g.pmtuWG.Add(1)
	go g.followPathMTU(c)
}

// followPathMTU reads c until it is closed (Close), setting the engine's
// path MTUs from the errors it takes (pathMTUOf) and forgetting them
// after pathMTUExpiry.
func (g *Gateway) followPathMTU(c *icmp.PacketConn) {
	defer g.pmtuWG.Done()
	set := make(map[netip.Addr]time.Time) // endpoint → when its path MTU was last set
	buf := make([]byte, header.ICMPv6ErrorMaxLen)
	next := time.Now().Add(pathMTUSweep)
	for {
		c.SetReadDeadline(next)
		n, from, err := c.ReadFrom(buf)
		now := time.Now()
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			if !errors.Is(err, net.ErrClosed) {
				g.log.Warn("ICMPv6 packet too big no longer read", "err", err)
			}
			return
		}
		if err == nil {
			if dst, mtu, ok := g.pathMTUOf(buf[:n]); ok {
				old := g.engine.PathMTUs()[dst]
				if g.engine.SetPathMTU(dst, mtu) {
					set[dst] = now
					if got := g.engine.PathMTUs()[dst]; got != old {
						g.log.Info("path MTU toward an endpoint lowered by an ICMPv6 packet too big: outer packets to it larger than that leave as IPv6 fragments",
							"endpoint", dst, "path_mtu", got, "from", from, "expires_in", pathMTUExpiry)
					}
				}
			}
		}
		if now.Before(next) {
			continue
		}
		next = now.Add(pathMTUSweep)
		for a, t := range set {
			if now.Sub(t) >= pathMTUExpiry {
				g.engine.SetPathMTU(a, 0)
				delete(set, a)
				g.log.Info("path MTU toward an endpoint expired: full-size outer packets to it leave whole again", "endpoint", a)
			}
		}
	}
}

// pathMTUOf reads msg, an ICMPv6 message, as a "packet too big" about an
// outer packet of ours (RFC 4443 §3.2; its source one of the WAN
// addresses, UDP from one of the WireGuard ports, whole or a first
// fragment): it returns the quoted packet's destination, the endpoint,
// and the MTU the error reports. ok is false for anything else, and for
// an MTU no less than the WAN's, which bounds the packets already.
func (g *Gateway) pathMTUOf(msg []byte) (dst netip.Addr, mtu int, ok bool) {
	const quote = icmpv6HeaderLen + header.IPv6Len
	if len(msg) < quote+header.UDPLen || msg[0] != 2 || msg[1] != 0 || msg[8]>>4 != header.IPv6Version {
		return dst, 0, false
	}
	q := msg[icmpv6HeaderLen:]
	src, dst := netip.AddrFrom16([16]byte(q[8:24])), netip.AddrFrom16([16]byte(q[24:40]))
	nh, l4 := q[6], q[header.IPv6Len:]
	if nh == header.ProtoFragment {
		if len(l4) < header.IPv6FragmentLen+header.UDPLen || binary.BigEndian.Uint16(l4[2:4])&^7 != 0 {
			return dst, 0, false
		}
		nh, l4 = l4[0], l4[header.IPv6FragmentLen:]
	}
	if nh != header.ProtoUDP {
		return dst, 0, false
	}
	// The port the engine sends from now (a wg set listen-port moves it
	// from the configuration's).
	sport, port := binary.BigEndian.Uint16(l4[0:2]), uint16(0)
	if g.engine != nil {
		port, _, _ = g.engine.WAN()
	}
	g.wanMu.Lock()
	ours := port != 0 && sport >= port && int(sport) < int(port)+int(max(g.cfg.SourcePorts, 1)) &&
		slices.Contains(g.wanAddrs(), src)
	g.wanMu.Unlock()
	mtu = int(min(binary.BigEndian.Uint32(msg[4:8]), fastpath.MaxMTU))
	if !ours || g.wan == nil || mtu >= g.wan.MTU() {
		return dst, 0, false
	}
	return dst, mtu, true
}

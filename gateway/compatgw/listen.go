//go:build linux

package compatgw

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/wgpio/wgpio/bind"
	"github.com/wgpio/wgpio/internal/threadns"
)

// moveListenPort is the bind's Config.Move: wg set NAME listen-port N (or
// wg setconf with another ListenPort) on a running gateway, which
// wireguard-go applies by closing its bind and opening it on port. The
// port is refused with EADDRINUSE, as wireguard-go's sockets would be
// refused, when a socket of the host holds it on a WAN address (the
// probe binds and closes one socket per address, in the gateway's
// namespace); else the WAN's XDP filter matches port from now on, and the
// bind sends from it. Peers follow the new port when they receive an
// authenticated packet from it (roaming), as from wireguard-go's.
func (g *Gateway) moveListenPort(port uint16) error {
	g.wanMu.Lock()
	defer g.wanMu.Unlock()
	if err := g.inNamespace(func() error { return probeUDP(port, g.wanAddrs) }); err != nil {
		return err
	}
	if err := g.wan.SetUDP(bind.XDPFilter(g.wanAddrs, port, false).UDP); err != nil {
		return fmt.Errorf("XDP filter: %w", err)
	}
	g.log.Info("listen port moved", "from", g.listenPort, "to", port)
	g.listenPort = port
	return nil
}

// probeUDP returns EADDRINUSE (wrapped) if a UDP socket of the host holds
// port on one of addrs.
func probeUDP(port uint16, addrs []netip.Addr) error {
	for _, a := range addrs {
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, port)))
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("listen port %d on %v: %w", port, a, err)
		}
		if err == nil {
			c.Close()
		}
		// Another failure (an address still tentative) says nothing
		// about the port.
	}
	return nil
}

// inNamespace runs fn on a thread in the gateway's network namespace (the
// one Start ran in, when it was not the process's; see threadns.Moved):
// wireguard-go calls Move from a UAPI goroutine, on any thread.
func (g *Gateway) inNamespace(fn func() error) error { return threadns.Do(g.nsHandle, fn) }

//go:build linux

package fastgw

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/internal/kernelsock"
	"github.com/wgpio/wgpio/internal/threadns"
)

// moveListenPort moves the gateway to another listen port while it runs
// (gateway.Options.SetListenPort: wg set NAME listen-port N, wg setconf), as
// wireguard-go rebinds its sockets: the kernel sockets that receive
// reassembled datagrams are opened on the new ports, the WAN XDP filter
// then matches them, the engine sends from them (the SourcePorts range,
// which starts at the listen port, moves with it), and the old sockets
// close. Port 0 picks a free port (one whose whole range is free when
// SourcePorts > 1, as far as a probe can tell). It returns the port in use.
func (g *Gateway) moveListenPort(port uint16) (uint16, error) {
	g.wanMu.Lock()
	defer g.wanMu.Unlock()
	// Sockets belong to the namespace of the thread that opens them: the
	// gateway's, not the UAPI goroutine's.
	var err error
	if port == 0 {
		err = g.inNamespace(func() (err error) {
			port, err = g.freePort()
			return err
		})
		if err != nil {
			return 0, err
		}
	}
	if int(port)+int(g.cfg.SourcePorts)-1 > 65535 {
		return 0, fmt.Errorf("source ports %d-%d pass 65535: %w", port, int(port)+int(g.cfg.SourcePorts)-1, errRange)
	}
	if port == g.cfg.ListenPort {
		return port, nil
	}
	var socks *kernelsock.Pending
	if g.kernel != nil { // shared mode
		// Opened in the gateway's namespace (kernelsock.Set.Open).
		var serr error
		socks, serr = g.kernel.Open(port, g.wanAddrs()...)
		if rerr := kernelsock.Refusal(port, serr); rerr != nil {
			// The host uses the port, or it is privileged (the errno
			// reaches `wg` as the reply's): refuse, as wireguard-go
			// does, and keep the old port. Other failures (an address
			// still tentative) are logged by Open and the move goes
			// on, as at start.
			socks.Abort()
			return 0, rerr
		}
	}
	if err := g.wan.SetUDP(g.udpMatches(port)); err != nil {
		if socks != nil {
			socks.Abort()
		}
		g.wan.SetUDP(g.udpMatches(g.cfg.ListenPort)) // best effort back
		return 0, fmt.Errorf("XDP filter: %w", err)
	}
	if err := g.engine.SetWAN(port, g.wanV4, g.wanV6, g.wanOthers...); err != nil {
		if socks != nil {
			socks.Abort()
		}
		return 0, err
	}
	if socks != nil {
		socks.Commit() // the old port's sockets close
	}
	// gateway.Device logs the change (Info), for every dataplane.
	g.log.Debug("listen port moved", "from", g.cfg.ListenPort, "to", port, "source_ports", g.cfg.SourcePorts)
	g.cfg.ListenPort = port
	return port, nil
}

var errRange = errors.New("port range too large")

// udpMatches is the WAN filter's UDP part for the listen port port and the
// current WAN addresses. g.wanMu held.
func (g *Gateway) udpMatches(port uint16) []afxdp.UDPMatch {
	c := g.cfg
	c.ListenPort = port
	return wanFilter(c, g.wanV4, g.wanV6, g.wanSide.vid, g.wanOthers...).UDP
}

// freePort asks the kernel for a free UDP port (as
// wireguard-go does for listen-port 0) whose SourcePorts range fits below
// 65536. g.wanMu held.
func (g *Gateway) freePort() (uint16, error) {
	// The wildcard address: a port free there is free on every address,
	// ours included.
	a, network := netip.IPv4Unspecified(), "udp4"
	if !g.wanV4.IsValid() {
		a, network = netip.IPv6Unspecified(), "udp6"
	}
	for range 16 {
		c, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, 0)))
		if err != nil {
			return 0, fmt.Errorf("find a free port: %w", err)
		}
		p := uint16(c.LocalAddr().(*net.UDPAddr).Port)
		ok := int(p)+int(g.cfg.SourcePorts)-1 <= 65535 && rangeFree(network, a, p+1, g.cfg.SourcePorts-1)
		c.Close()
		if ok {
			return p, nil
		}
	}
	return 0, errors.New("find a free port: none with room for the source port range")
}

// rangeFree reports whether the n UDP ports from first on are free at the
// wildcard address a (network "udp4" or "udp6"): each is bound, then all
// are closed. The kernel's pick of a free port says nothing of the ports
// above it, which SourcePorts > 1 takes too: without, listen-port 0 could
// pick a port whose range another socket held, and be refused as in use.
func rangeFree(network string, a netip.Addr, first, n uint16) bool {
	var held []*net.UDPConn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := range n {
		c, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, first+i)))
		if err != nil {
			return false
		}
		held = append(held, c)
	}
	return true
}

// inNamespace runs fn on a thread in the gateway's network namespace (the
// one Start ran in, when it was not the process's; see threadns.Moved).
func (g *Gateway) inNamespace(fn func() error) error { return threadns.Do(g.nsHandle, fn) }

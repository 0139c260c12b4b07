//go:build linux

package compatgw

import (
	"fmt"

	"github.com/wgpio/wgpio/bind"
	"github.com/wgpio/wgpio/internal/kernelsock"
)

// moveListenPort is the bind's Config.Move: wg set NAME listen-port N (or
// wg setconf with another ListenPort) on a running gateway, which
// wireguard-go applies by closing its bind and opening it on port. The
// kernel sockets that take the datagrams reassembled from fragments
// (kernelsock.go) are opened on the new port first; the port is refused
// with EADDRINUSE, as wireguard-go's sockets would be refused, when a
// socket of the host holds it on a WAN address, and with EACCES when the
// process may not bind it (kernelsock.Refusal); else the WAN's XDP filter
// matches port from now on, the sockets of the old port close, and the
// bind sends from it. Other failures to open a socket (an address still
// tentative) are logged and the move goes on, as at start. Peers follow
// the new port when they receive an authenticated packet from it
// (roaming), as from wireguard-go's.
func (g *Gateway) moveListenPort(port uint16) error {
	g.wanMu.Lock()
	defer g.wanMu.Unlock()
	// Opened in the gateway's namespace (kernelsock.Set.Open):
	// wireguard-go calls Move from a UAPI goroutine, on any thread.
	socks, err := g.kernel.Open(port, g.wanAddrs...)
	if rerr := kernelsock.Refusal(port, err); rerr != nil {
		socks.Abort()
		return rerr
	}
	if err := g.wan.SetUDP(bind.XDPFilter(g.wanAddrs, port, false).UDP); err != nil {
		socks.Abort()
		return fmt.Errorf("XDP filter: %w", err)
	}
	socks.Commit()
	g.log.Info("listen port moved", "from", g.listenPort, "to", port)
	g.listenPort = port
	return nil
}

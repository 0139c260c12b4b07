//go:build linux

package compatgw

import (
	"net/netip"

	"github.com/wgpio/wgpio/internal/kernelsock"
)

// listenKernel opens a kernel UDP socket on each of addrs (the WAN's) and
// port, the listen port (package kernelsock), whose readers hand the
// bind (bind.Bind.ReceiveKernel) the WireGuard datagrams the WAN's XDP
// program leaves to the kernel: IP fragments, which the kernel
// reassembles, and datagrams with IPv4 options or IPv6 extension headers.
// A peer whose WAN or path MTU is below its datagrams' size sends them
// fragmented (Linux's WireGuard, whose kernel fragments its outer
// packets; wgpio's bind and fast path); without the sockets the kernel
// dropped them and answered ICMP port unreachable, where a Linux wg0's
// socket receives them. The sockets follow the listen port
// (moveListenPort) and the WAN's addresses (wanAddressesChanged), and
// close at Close. A port another socket of the host holds is refused
// (kernelsock.Set.Listen: EADDRINUSE), as in fast-path mode and as
// wireguard-go's own bind refuses it; an address whose socket fails
// otherwise is logged and skipped: its fragmented datagrams are then lost
// (the kernel's UDP counters count them). What the kernel drops
// at a socket (its receive buffer full) is the bind's kernel_socket_full
// (bind.Bind.CountKernelSocketDrops). g.wanMu held or the
// gateway not yet running.
func (g *Gateway) listenKernel(port uint16, addrs ...netip.Addr) error {
	g.kernel = kernelsock.New(g.log, g.nsHandle, 1, func(src, dst netip.AddrPort, msg []byte) {
		g.bind.ReceiveKernel(src, dst, msg) // counted there when dropped
	})
	if err := g.kernel.Listen(port, addrs...); err != nil {
		return &SettingError{Key: "ListenPort", Err: err}
	}
	// What the kernel drops at the sockets (their receive buffers full)
	// is the bind's kernel_socket_full.
	g.bind.CountKernelSocketDrops(g.kernel.Drops)
	g.closers = append(g.closers, func() error {
		g.wanMu.Lock()
		defer g.wanMu.Unlock()
		g.kernel.Close() // its readers take no lock
		return nil
	})
	return nil
}

//go:build linux

package testenv

import (
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/internal/topo"
)

// SendFrames sends frames out of dev in ns, each as written, through an
// AF_PACKET socket: 802.1Q tags included (the machine may lack the 8021q
// module) and addresses the kernel would not route (a martian source),
// or fails the test.
func SendFrames(t testing.TB, ns *topo.NS, dev string, frames ...[]byte) {
	t.Helper()
	err := ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return os.NewSyscallError("socket", err)
		}
		defer unix.Close(fd)
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		for _, f := range frames {
			sa := &unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6}
			copy(sa.Addr[:], f[0:6])
			if err := unix.Sendto(fd, f, 0, sa); err != nil {
				return os.NewSyscallError("sendto", err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("send on %s: %v", dev, err)
	}
}

//go:build linux

package fastgw_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
	"golang.org/x/sys/unix"
)

// TestARPStormFromPeerSide: 20,000 ARP requests to gwA's WAN MAC from
// random MACs, claiming the peer's address, overflow the kernel neighbour
// notifications wgpio follows and poison the kernel's entry for the peer.
// The tunnel must come back once the real peer is heard from again (the
// readers re-subscribe in gwA's namespace, and the control plane follows
// the endpoint's next-hop MAC).
func TestARPStormFromPeerSide(t *testing.T) {
	testenv.Tool(t, "ping", "iputils-ping")
	s := newSite(t, twosite.Config{})
	ping(t, s.HostA, twosite.HostB4.String(), 0)
	wan, _ := s.Gateway.Ports()
	gwMAC := wan.MAC()
	var wanB string
	out, err := s.GwB.Run("ip", "-o", "-4", "addr", "show")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "198.18.1.2/") {
			wanB = strings.TrimSuffix(strings.Fields(line)[1], ":")
		}
	}
	if err := s.GwB.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		ifi, err := net.InterfaceByName(wanB)
		if err != nil {
			return err
		}
		sa := &unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6}
		copy(sa.Addr[:], gwMAC)
		f := make([]byte, 42)
		full := 0 // sends refused for a full transmit path (ENOBUFS)
		for i := 0; i < 20000; i++ {
			src := []byte{0x02, 0xbb, byte(i >> 16), byte(i >> 8), byte(i), 0x01}
			copy(f[0:6], gwMAC)
			copy(f[6:12], src)
			f[12], f[13] = 0x08, 0x06
			copy(f[14:22], []byte{0, 1, 8, 0, 6, 4, 0, 1})
			copy(f[22:28], src)
			copy(f[28:32], []byte{198, 18, 1, 2}) // the peer's address
			copy(f[38:42], []byte{198, 18, 1, 1})
			if err := unix.Sendto(fd, f, 0, sa); err != nil {
				// The storm outruns the veth now and then (seen once in
				// a full run of the package): wait and send that frame
				// again, a storm is still a storm.
				if errors.Is(err, unix.ENOBUFS) && full < 10000 {
					full++
					time.Sleep(100 * time.Microsecond)
					i--
					continue
				}
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The real peer speaks again (its kernel refreshes its own entry for
	// us, ARP both ways), and the tunnel must carry traffic again.
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.GwB.Run("ping", "-c", "1", "-W", "1", "198.18.1.1")
		if _, err := s.HostA.Run("ping", "-c", "1", "-W", "1", twosite.HostB4.String()); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tunnel dead 30 s after the ARP storm; drops %s", dropsString(s.Gateway))
		}
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

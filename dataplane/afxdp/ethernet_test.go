//go:build linux

package afxdp

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
)

// TestCheckEthernet: the loopback (and any link that is not Ethernet) is
// refused by name and type before a port opens on it; an Ethernet link
// passes.
func TestCheckEthernet(t *testing.T) {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		t.Fatalf("lo: %v", err)
	}
	err = CheckEthernet(lo)
	if !errors.Is(err, ErrNotEthernet) || !strings.Contains(err.Error(), `lo is of link type "loopback"`) {
		t.Errorf("CheckEthernet(lo) = %v, want ErrNotEthernet naming lo and its type", err)
	}
	if _, err := Open("lo", Config{}); !errors.Is(err, ErrNotEthernet) {
		t.Errorf("Open(lo) = %v, want ErrNotEthernet", err)
	}
	tun := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: "wg0", EncapType: "none"}}
	if err := CheckEthernet(tun); !errors.Is(err, ErrNotEthernet) {
		t.Errorf("CheckEthernet(a layer-3 TUN) = %v, want ErrNotEthernet", err)
	}
	mac, _ := net.ParseMAC("02:00:00:00:00:01")
	eth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "v0", EncapType: "ether", HardwareAddr: mac}}
	if err := CheckEthernet(eth); err != nil {
		t.Errorf("CheckEthernet(a veth) = %v, want nil", err)
	}
}

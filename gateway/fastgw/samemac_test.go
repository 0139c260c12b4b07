//go:build linux

package fastgw

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
)

// TestSameMAC: a kernel VLAN device of another MAC than its trunk's is an
// error of the setting that named it (the WAN or LAN itself, "eth0.100",
// or its VLAN key with the trunk, WANVLAN), with the command that fixes
// it: the XDP program on the trunk takes frames to the trunk's MAC only,
// and the kernel answers ARP/NDP for the VLAN device's address with the
// VLAN device's. Before, a WANVLAN's device of its own MAC was taken,
// and its WireGuard traffic went to the kernel.
func TestSameMAC(t *testing.T) {
	trunk := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Name: "eth0", HardwareAddr: net.HardwareAddr{2, 0, 0, 0, 0, 1}}}
	v := &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: "eth0.100", HardwareAddr: net.HardwareAddr{2, 0, 0, 0, 0, 1}}, VlanId: 100}
	if err := sameMAC("WAN", "WANVLAN", v, trunk); err != nil {
		t.Fatalf("the same MAC: %v", err)
	}
	v.HardwareAddr = net.HardwareAddr{2, 0, 0, 0, 0, 9}
	err := sameMAC("WAN", "WANVLAN", v, trunk)
	var se *SettingError
	if !errors.As(err, &se) || se.Key != "WANVLAN" || !strings.Contains(err.Error(), "ip link set dev eth0.100 address 02:00:00:00:00:01") {
		t.Fatalf("another MAC: %v, want a SettingError of WANVLAN with the fix", err)
	}
}

//go:build linux

package afxdp

import (
	"encoding/binary"
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// netdev generic netlink family (include/uapi/linux/netdev.h, Linux 6.3):
// what a device's driver declares of its XDP.
const (
	netdevCmdDevGet                 = 1
	netdevADevIfindex               = 1
	netdevADevXDPFeatures           = 3 // u64, enum netdev_xdp_act
	netdevADevXDPRXMetadataFeatures = 5 // u64, enum netdev_xdp_rx_metadata
	netdevXDPRXMetadataVLANTag      = 4
)

// netdevDevGet returns the u64 attributes of the netdev family's dev-get
// for ifindex (in the calling thread's network namespace). An error means
// the kernel cannot say (before Linux 6.3 there is no such family).
func netdevDevGet(ifindex int) (map[uint16]uint64, error) {
	fam, err := netlink.GenlFamilyGet("netdev")
	if err != nil {
		return nil, fmt.Errorf("netdev netlink family (Linux 6.3): %w", err)
	}
	req := nl.NewNetlinkRequest(int(fam.ID), 0)
	// struct genlmsghdr: command, version, two reserved bytes (zero).
	req.AddData(rawData{netdevCmdDevGet, 1, 0, 0})
	req.AddData(nl.NewRtAttr(netdevADevIfindex, nl.Uint32Attr(uint32(ifindex))))
	msgs, err := req.Execute(unix.NETLINK_GENERIC, 0)
	if err != nil {
		return nil, fmt.Errorf("netdev dev-get: %w", err)
	}
	out := make(map[uint16]uint64)
	for _, m := range msgs {
		if len(m) < 4 {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[4:]) // after struct genlmsghdr
		if err != nil {
			return nil, fmt.Errorf("netdev dev-get: %w", err)
		}
		for _, a := range attrs {
			if len(a.Value) >= 8 {
				out[a.Attr.Type] = binary.NativeEndian.Uint64(a.Value)
			}
		}
	}
	return out, nil
}

// metadataHasVLANTag reports whether the device's driver implements the
// VLAN tag XDP metadata (the netdev family's xdp-rx-metadata-features,
// Linux 6.8 for the VLAN tag). An error means the kernel cannot say.
func metadataHasVLANTag(ifindex int) (bool, error) {
	attrs, err := netdevDevGet(ifindex)
	if err != nil {
		return false, err
	}
	return attrs[netdevADevXDPRXMetadataFeatures]&netdevXDPRXMetadataVLANTag != 0, nil
}

// rawData is bytes added to a netlink request as they are.
type rawData []byte

func (d rawData) Len() int          { return len(d) }
func (d rawData) Serialize() []byte { return d }

//go:build linux

package afxdp

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf/btf"
	"github.com/wgpio/wgpio/internal/ethtool"
)

// IEEE 802.1Q VLAN identifiers (IEEE 802.1Q §9.6); vlanTagLen is in
// queue.go.
const (
	vlanIDMask = 0x0fff // the VID in a TCI
	maxVLANID  = 4094   // 4095 is reserved
)

// StrippedTags says how a port's XDP program learns of the 802.1Q tags the
// NIC takes off received frames before XDP runs (RX VLAN offload, on by
// default on most NICs): without it, a tagged frame looks untagged to the
// program, and VLAN isolation (Filter.VLAN) cannot hold.
type StrippedTags int

const (
	// StrippedTagsNone: the device strips no tags, so every tag is in the
	// frame: its RX VLAN offload is off, or was turned off by Open (and is
	// turned back on by Close), or the device has none.
	StrippedTagsNone StrippedTags = iota
	// StrippedTagsMetadata: the device may strip tags and the program
	// reads them from the XDP metadata (bpf_xdp_metadata_rx_vlan_tag:
	// Linux 6.8, native XDP, drivers that implement it, veth among them).
	StrippedTagsMetadata
	// StrippedTagsUnseen: the device may strip tags and the program cannot
	// see them: a frame of any VLAN whose tag the NIC stripped is judged
	// as untagged. Turn RX VLAN offload off (ethtool -K DEV rxvlan off)
	// or use native XDP on a driver with the VLAN metadata.
	StrippedTagsUnseen
)

// String names s for logs: "none", "metadata" or "unseen".
func (s StrippedTags) String() string {
	switch s {
	case StrippedTagsNone:
		return "none"
	case StrippedTagsMetadata:
		return "metadata"
	case StrippedTagsUnseen:
		return "unseen"
	}
	return fmt.Sprintf("StrippedTags(%d)", int(s))
}

// The kernel's feature names for RX VLAN offload (net/ethtool/common.c,
// netdev_features_strings): 802.1Q and 802.1ad tags.
var rxVLANFeatures = []string{"rx-vlan-hw-parse", "rx-vlan-stag-hw-parse"}

// vlanOffload is what Open changed of a device's RX VLAN offload, to undo
// at Close.
type vlanOffload struct {
	h        *ethtool.Handle // in the device's namespace; nil if it could not be opened
	ifname   string
	restore  []string // features Open turned off
	stillOn  []string // features on that could not be turned off
	checkErr error    // why the features could not be read
}

// disableRXVLANOffload turns the device's RX VLAN offload features off
// where they are on and changeable, and reports what it did.
func disableRXVLANOffload(ifname string) *vlanOffload {
	v := &vlanOffload{ifname: ifname}
	h, err := ethtool.Open()
	if err != nil {
		v.checkErr = err
		return v
	}
	v.h = h
	for _, name := range rxVLANFeatures {
		f, err := h.Get(ifname, name)
		if errors.Is(err, ethtool.ErrNoFeature) {
			continue // a kernel without the feature: no device strips such tags
		}
		if err != nil {
			v.checkErr = err
			return v
		}
		if !f[0].Active {
			continue
		}
		if f[0].Available && h.Set(ifname, name, false) == nil {
			v.restore = append(v.restore, name)
			continue
		}
		v.stillOn = append(v.stillOn, name)
	}
	return v
}

// restoreOffload turns back on what disableRXVLANOffload turned off.
func (v *vlanOffload) restoreOffload() error {
	if v.h == nil {
		return nil
	}
	var errs []error
	for _, name := range v.restore {
		errs = append(errs, v.h.Set(v.ifname, name, true))
	}
	v.restore = nil
	errs = append(errs, v.h.Close())
	v.h = nil
	return errors.Join(errs...)
}

var vlanKfunc struct {
	once sync.Once
	id   int64
	err  error
}

// vlanTagKfunc returns the vmlinux BTF ID of bpf_xdp_metadata_rx_vlan_tag
// (Linux 6.8), probed once.
func vlanTagKfunc() (int64, error) {
	vlanKfunc.once.Do(func() {
		spec, err := btf.LoadKernelSpec()
		if err != nil {
			vlanKfunc.err = fmt.Errorf("kernel BTF: %w", err)
			return
		}
		var fn *btf.Func
		if err := spec.TypeByName("bpf_xdp_metadata_rx_vlan_tag", &fn); err != nil {
			vlanKfunc.err = fmt.Errorf("bpf_xdp_metadata_rx_vlan_tag (Linux 6.8): %w", err)
			return
		}
		id, err := spec.TypeID(fn)
		if err != nil {
			vlanKfunc.err = fmt.Errorf("bpf_xdp_metadata_rx_vlan_tag: %w", err)
			return
		}
		vlanKfunc.id = int64(id)
	})
	return vlanKfunc.id, vlanKfunc.err
}

//go:build linux

package afxdp

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/cilium/ebpf/btf"
	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
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

// LogStrippedTags logs how the port (the side side, "WAN" or "LAN", of its
// user) sees the 802.1Q tags its NIC strips (StrippedTags), at error level
// when it cannot: VLAN isolation then does not hold on that interface.
func (p *Port) LogStrippedTags(log *slog.Logger, side string) {
	st, why := p.StrippedTags()
	if st == StrippedTagsUnseen {
		fix := p.fixTags
		if fix == "" {
			fix = "turn RX VLAN offload off (ethtool -K " + p.Name() + " rxvlan off) or use native XDP on a driver with the VLAN XDP metadata (Linux 6.8)"
		}
		log.Error("VLAN ISOLATION DOES NOT HOLD: the NIC may strip 802.1Q tags before XDP and the XDP program cannot see them, so frames of other VLANs may be taken as this side's",
			"side", side, "interface", p.Name(), "why", why, "fix", fix)
		return
	}
	log.Info("VLAN tags", "side", side, "interface", p.Name(), "stripped_tags", st.String(), "why", why)
}

// The kernel's feature names for RX and TX VLAN offload
// (net/ethtool/common.c, netdev_features_strings): 802.1Q and 802.1ad
// tags.
var (
	rxVLANFeatures = []string{"rx-vlan-hw-parse", "rx-vlan-stag-hw-parse"}
	txVLANFeatures = []string{"tx-vlan-hw-insert", "tx-vlan-stag-hw-insert"}
)

// txVLANOffloadOff reports whether interface name (of this network
// namespace) has its TX VLAN offload off, both tags' (a feature the
// kernel lacks counts as off); false when they cannot be read.
func txVLANOffloadOff(name string) bool {
	e, err := ethtool.NewEthtool()
	if err != nil {
		return false
	}
	defer e.Close()
	fs, err := e.Features(name)
	if err != nil {
		return false
	}
	for _, f := range txVLANFeatures {
		if fs[f] {
			return false
		}
	}
	return true
}

// vlanOffload is what Open changed of a device's RX VLAN offload, to undo
// at Close.
type vlanOffload struct {
	e        *ethtool.Ethtool // in the device's namespace; nil if it could not be opened
	change   OffloadChange    // Off: the features Open turned off
	journal  OffloadJournal   // holds change since Record, or nil
	stillOn  []string         // features on that could not be turned off
	checkErr error            // why the features could not be read
}

// disableRXVLANOffload turns the RX VLAN offload features of the device
// ifname, of index ifindex and address mac, off where they are on and
// changeable, and reports what it did. Before the change it records it
// in j (if not nil): the error it returns is j's, the device left as it
// is.
func disableRXVLANOffload(ifname string, ifindex int, mac net.HardwareAddr, j OffloadJournal) (*vlanOffload, error) {
	v := &vlanOffload{change: OffloadChange{Netns: threadNetns(), Ifindex: ifindex, Name: ifname, MAC: mac}}
	e, err := ethtool.NewEthtool()
	if err != nil {
		v.checkErr = fmt.Errorf("ethtool socket: %w", err)
		return v, nil
	}
	v.e = e
	fs, err := e.FeaturesWithState(ifname)
	if err != nil {
		v.checkErr = fmt.Errorf("%s: read features: %w", ifname, err)
		return v, nil
	}
	off := make(map[string]bool)
	var asked []string
	for _, name := range rxVLANFeatures {
		switch f, ok := fs[name]; {
		case !ok || !f.Active:
			// Off, or a kernel without the feature: no device strips
			// such tags.
		case f.Available:
			off[name] = false
			asked = append(asked, name)
		default:
			v.stillOn = append(v.stillOn, name)
		}
	}
	if len(off) == 0 {
		return v, nil
	}
	// Recorded first: a process that dies between the change and
	// the record would leave it unknown. A feature recorded and not
	// turned off is on, and turned on again harmlessly.
	if j != nil {
		rec := v.change
		rec.Off = asked
		if err := j.Record(rec); err != nil {
			return v, fmt.Errorf("%s: record the change of RX VLAN offload before it is made: %w", ifname, err)
		}
		v.journal = j
	}
	// The driver may keep a feature on that another depends on: read
	// back what is off now.
	err = e.Change(ifname, off)
	now, rerr := e.Features(ifname)
	var changed []string
	for _, name := range asked {
		if err == nil && rerr == nil && !now[name] {
			changed = append(changed, name)
		} else {
			v.stillOn = append(v.stillOn, name)
		}
	}
	v.change.Off = changed
	return v, nil
}

// restoreOffload turns back on, through ctl (a netlink handle of the
// device's namespace; nil: the calling thread's), what
// disableRXVLANOffload turned off on the device of the index it had
// then, whatever its name now, and tells the journal.
func (v *vlanOffload) restoreOffload(ctl *netlink.Handle) error {
	if v.e == nil {
		return nil
	}
	defer func() { v.e.Close(); v.e = nil }()
	if v.journal != nil {
		defer v.journal.Forget(v.change)
	}
	if len(v.change.Off) == 0 {
		return nil
	}
	byIndex := netlink.LinkByIndex
	if ctl != nil {
		byIndex = ctl.LinkByIndex
	}
	err := featuresOn(v.e, byIndex, v.change)
	if errors.Is(err, ErrNoSuchInterface) {
		return nil // the device is gone, and its features with it
	}
	return err
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

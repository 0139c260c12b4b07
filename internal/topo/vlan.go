//go:build linux

package topo

import (
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/safchain/ethtool"
)

// VLANAccess makes dev in n behave as a host on an 802.1Q access port of
// VLAN vid, without the 8021q module (which test machines may lack): a
// TCX egress program tags every frame dev sends with vid, and a TCX ingress
// program takes the tag off frames of vid and drops every other frame
// (untagged, or of another VLAN), so the host answers only what came
// tagged. With inband the tag is written into the frame (dev's TX VLAN
// offload is turned off); without, it travels beside it as the skb's VLAN
// metadata, as a NIC with RX VLAN offload hands it up, and the other end
// of a veth sees it only in its XDP metadata. The programs are removed by
// Close. Needs Linux 6.6 (TCX).
func (t *Topology) VLANAccess(n *NS, dev string, vid uint16, inband bool) error {
	return t.VLANAccessTPID(n, dev, unix.ETH_P_8021Q, vid, inband)
}

// VLANAccessTPID is VLANAccess with a tag of tpid: unix.ETH_P_8021AD for
// an 802.1ad (QinQ service) tag.
func (t *Topology) VLANAccessTPID(n *NS, dev string, tpid, vid uint16, inband bool) error {
	be := func(v uint16) int32 {
		var b [2]byte
		binary.BigEndian.PutUint16(b[:], v)
		return int32(binary.NativeEndian.Uint16(b[:]))
	}
	const (
		r0, r1, r2, r3, r6 = asm.R0, asm.R1, asm.R2, asm.R3, asm.R6
		// struct __sk_buff offsets (include/uapi/linux/bpf.h).
		skbVLANPresent, skbVLANTCI = 20, 24
		tcOK, tcShot               = 0, 2
	)
	egress := asm.Instructions{
		asm.Mov.Reg(r6, r1),
		asm.Mov.Imm(r2, be(tpid)), asm.Mov.Imm(r3, int32(vid)),
		asm.FnSkbVlanPush.Call(),
		asm.Mov.Imm(r0, tcOK), asm.Return(),
	}
	ingress := asm.Instructions{
		asm.Mov.Reg(r6, r1),
		asm.LoadMem(r2, r6, skbVLANPresent, asm.Word), asm.JEq.Imm(r2, 0, "drop"),
		asm.LoadMem(r2, r6, skbVLANTCI, asm.Word), asm.And.Imm(r2, 0x0fff),
		asm.JNE.Imm(r2, int32(vid), "drop"),
		asm.Mov.Reg(r1, r6), asm.FnSkbVlanPop.Call(),
		asm.Mov.Imm(r0, tcOK), asm.Return(),
		asm.Mov.Imm(r0, tcShot).WithSymbol("drop"), asm.Return(),
	}
	return n.Do(func() error {
		l, err := n.nl.LinkByName(dev)
		if err != nil {
			return fmt.Errorf("find %s in %s: %w", dev, n.Name, err)
		}
		if inband {
			e, err := ethtool.NewEthtool()
			if err != nil {
				return fmt.Errorf("ethtool socket: %w", err)
			}
			feature := "tx-vlan-hw-insert"
			if tpid == unix.ETH_P_8021AD {
				feature = "tx-vlan-stag-hw-insert"
			}
			err = e.Change(dev, map[string]bool{feature: false})
			e.Close()
			if err != nil {
				return fmt.Errorf("%s: turn %s off: %w", dev, feature, err)
			}
		}
		for _, p := range []struct {
			ins    asm.Instructions
			attach ebpf.AttachType
		}{{egress, ebpf.AttachTCXEgress}, {ingress, ebpf.AttachTCXIngress}} {
			prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "Dual MIT/GPL", Instructions: p.ins})
			if err != nil {
				return fmt.Errorf("load VLAN access program: %w", err)
			}
			lk, err := link.AttachTCX(link.TCXOptions{Interface: l.Attrs().Index, Program: prog, Attach: p.attach})
			prog.Close() // the link holds it
			if err != nil {
				return fmt.Errorf("attach VLAN access program to %s (TCX, Linux 6.6): %w", dev, err)
			}
			t.onClose(lk.Close)
		}
		return nil
	})
}

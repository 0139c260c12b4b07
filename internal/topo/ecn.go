//go:build linux

package topo

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// MarkCE makes dev in n behave as a congested router's interface: a TCX
// egress program sets the ECN field of every IPv4 UDP packet dev sends to
// CE (RFC 3168 §5), with the header checksum fixed (bpf_l3_csum_replace),
// whatever the packet carried before, Not-ECT included. Removed by Close.
// Needs Linux 6.6 (TCX).
func (t *Topology) MarkCE(n *NS, dev string) error {
	const (
		r0, r1, r2, r3, r4, r5, r6, r7, r8, r10 = asm.R0, asm.R1, asm.R2, asm.R3, asm.R4, asm.R5, asm.R6, asm.R7, asm.R8, asm.R10
		tcOK                                    = 0
		ethTypeOff, protoOff, tosOff, csumOff   = 12, 23, 15, 24
	)
	ins := asm.Instructions{
		asm.Mov.Reg(r6, r1),
		// LD_ABS: a big-endian load from the frame into r0 (r6 = ctx).
		asm.LoadAbs(ethTypeOff, asm.Half), asm.JNE.Imm(r0, 0x0800, "ok"),
		asm.LoadAbs(protoOff, asm.Byte), asm.JNE.Imm(r0, 17, "ok"),
		asm.LoadAbs(tosOff, asm.Byte), asm.Mov.Reg(r7, r0),
		asm.Mov.Reg(r8, r7), asm.Or.Imm(r8, 3),
		asm.JEq.Reg(r7, r8, "ok"),
		// The new TOS byte, through the stack.
		asm.StoreMem(r10, -8, r8, asm.Byte),
		asm.Mov.Reg(r1, r6), asm.Mov.Imm(r2, tosOff), asm.Mov.Reg(r3, r10), asm.Add.Imm(r3, -8),
		asm.Mov.Imm(r4, 1), asm.Mov.Imm(r5, 0), asm.FnSkbStoreBytes.Call(),
		// The checksum over the 16-bit word that holds the TOS: in
		// memory order the TOS is the high byte of a little-endian
		// load; the version/IHL byte, unchanged, cancels out.
		asm.Mov.Reg(r1, r6), asm.Mov.Imm(r2, csumOff),
		asm.Mov.Reg(r3, r7), asm.LSh.Imm(r3, 8),
		asm.Mov.Reg(r4, r8), asm.LSh.Imm(r4, 8),
		asm.Mov.Imm(r5, 2), asm.FnL3CsumReplace.Call(),
		asm.Mov.Imm(r0, tcOK).WithSymbol("ok"), asm.Return(),
	}
	return n.Do(func() error {
		l, err := n.nl.LinkByName(dev)
		if err != nil {
			return fmt.Errorf("find %s in %s: %w", dev, n.Name, err)
		}
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "Dual MIT/GPL", Instructions: ins})
		if err != nil {
			return fmt.Errorf("load CE-marking program: %w", err)
		}
		lk, err := link.AttachTCX(link.TCXOptions{Interface: l.Attrs().Index, Program: prog, Attach: ebpf.AttachTCXEgress})
		prog.Close() // the link holds it
		if err != nil {
			return fmt.Errorf("attach CE-marking program to %s (TCX, Linux 6.6): %w", dev, err)
		}
		t.onClose(lk.Close)
		return nil
	})
}

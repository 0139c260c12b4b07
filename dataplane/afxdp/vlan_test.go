//go:build linux

package afxdp

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/safchain/ethtool"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/internal/testenv"
)

// tagFrame returns frame with an 802.1Q tag of tci inserted after the MACs.
func tagFrame(frame []byte, tci uint16) []byte {
	out := append([]byte{}, frame[:12]...)
	out = binary.BigEndian.AppendUint16(out, 0x8100)
	out = binary.BigEndian.AppendUint16(out, tci)
	return append(out, frame[12:]...)
}

// receiveMarked waits up to wait for a frame on port whose bytes contain
// mark and returns a copy of it, or nil.
func receiveMarked(port *Port, mark []byte, wait time.Duration) []byte {
	frames := make([]dataplane.Frame, 64)
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		for qi := range port.NumQueues() {
			rx := port.Queue(qi).RX()
			k := rx.Receive(frames)
			var found []byte
			for i := range k {
				if b := frames[i].Data(); found == nil && bytes.Contains(b, mark) {
					found = append([]byte{}, b...)
				}
			}
			rx.Free(frames[:k])
			if found != nil {
				return found
			}
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// TestVLANIsolation sends tagged and untagged UDP to a port's address and
// port on a veth (native XDP) and checks which reach the socket: with the
// default filter, untagged and priority-tagged frames only; a frame of
// VLAN 100, tagged in the frame or beside it in the skb's VLAN metadata
// (as a NIC's RX VLAN offload leaves it), goes to the kernel, counted as
// xdp_pass_vlan. A port for VLAN 100 gets that VLAN's frames only, with a
// stripped tag put back in the frame. RX VLAN offload is off while a port
// is open and on again after.
func TestVLANIsolation(t *testing.T) {
	p := newVethPair(t, 1)
	dst := netip.AddrPortFrom(p.ipB, 5000)
	src := netip.AddrPortFrom(p.ipA, 4000)
	frame := func(mark string) []byte {
		b := make([]byte, 2048)
		n := udpFrame(b, p.macA, p.macB, src, dst, []byte(mark))
		return b[:n]
	}
	offload := func() bool {
		var on bool
		if err := p.b.Do(func() error {
			e, err := ethtool.NewEthtool()
			if err != nil {
				return err
			}
			defer e.Close()
			f, err := e.Features(p.v.B)
			on = f["rx-vlan-hw-parse"]
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return on
	}
	if !offload() {
		t.Fatal("veth's rx-vlan-hw-parse is off before the test; want veth's default, on")
	}
	port := openIn(t, p.b, p.v.B, Config{Filter: Filter{UDP: []UDPMatch{{Addr: p.ipB, PortLo: 5000, PortHi: 5000}}}})
	if !port.NativeXDP() {
		t.Fatalf("native XDP on veth failed: %v", port.NativeXDPError())
	}
	if s, why := port.StrippedTags(); s != StrippedTagsMetadata {
		t.Errorf("StrippedTags() = %v (%s), want metadata (veth, Linux 6.8+)", s, why)
	}
	if offload() {
		t.Error("rx-vlan-hw-parse is on while the port is open")
	}
	passVLAN := func(port *Port) uint64 { return port.Stats().Backend["xdp_pass_vlan"] }
	expect := func(port *Port, name string, f []byte, mark string, want bool) []byte {
		t.Helper()
		before := passVLAN(port)
		testenv.SendFrames(t, p.a, p.v.A, f)
		wait := 3 * time.Second
		if !want {
			wait = 300 * time.Millisecond
		}
		got := receiveMarked(port, []byte(mark), wait)
		switch {
		case want && got == nil:
			t.Errorf("%s: not received", name)
		case !want && got != nil:
			t.Errorf("%s: received % x, want it left to the kernel", name, got[:18])
		case !want && passVLAN(port) == before:
			t.Errorf("%s: xdp_pass_vlan did not move", name)
		}
		return got
	}
	expect(port, "untagged", frame("untagged-1"), "untagged-1", true)
	expect(port, "vlan 100", tagFrame(frame("vlan100-1"), 100), "vlan100-1", false)
	if got := expect(port, "priority tag", tagFrame(frame("prio-1"), 0x6000), "prio-1", true); got != nil {
		if binary.BigEndian.Uint16(got[12:]) != 0x8100 || binary.BigEndian.Uint16(got[14:]) != 0x6000 {
			t.Errorf("priority-tagged frame arrived as % x, want its tag kept", got[:18])
		}
	}

	// From now on A's frames carry VLAN 100 as skb metadata.
	if err := p.tp.VLANAccess(p.a, p.v.A, 100, false); err != nil {
		t.Fatal(err)
	}
	expect(port, "vlan 100 stripped", frame("stripped-1"), "stripped-1", false)
	if err := port.Close(); err != nil {
		t.Fatal(err)
	}
	if !offload() {
		t.Error("rx-vlan-hw-parse still off after Close")
	}

	vport := openIn(t, p.b, p.v.B, Config{Filter: Filter{UDP: []UDPMatch{{Addr: p.ipB, PortLo: 5000, PortHi: 5000}}, VLAN: 100}})
	if got := expect(vport, "vlan 100 stripped to a VLAN 100 port", frame("stripped-2"), "stripped-2", true); got != nil {
		if binary.BigEndian.Uint16(got[12:]) != 0x8100 || binary.BigEndian.Uint16(got[14:])&0x0fff != 100 ||
			!bytes.Equal(got[0:12], frame("x")[0:12]) || binary.BigEndian.Uint16(got[16:]) != 0x0800 {
			t.Errorf("stripped tag not put back: frame starts % x", got[:18])
		}
	}
}

// TestStrippedTagsGeneric: on generic XDP the program reads no metadata.
// A veth hands over tags its peer's sender left beside the frame (TX VLAN
// offload) whatever its own RX offload, and generic XDP does not see them
// (the frame carries no tag): the port must say so.
func TestStrippedTagsGeneric(t *testing.T) {
	p := newVethPair(t, 1)
	filter := Filter{UDP: []UDPMatch{{Addr: p.ipB, PortLo: 5000, PortHi: 5000}}}
	for _, keep := range []bool{false, true} {
		port := openIn(t, p.b, p.v.B, Config{Attach: AttachGeneric, Filter: filter, KeepRXVLANOffload: keep})
		if s, why := port.StrippedTags(); s != StrippedTagsUnseen || !strings.Contains(why, "veth") {
			t.Errorf("generic on veth, keep offload %v: StrippedTags() = %v (%s), want unseen, naming the veth", keep, s, why)
		}
		port.Close()
	}
	// What "unseen" means: a frame tagged as metadata by A's sender is
	// taken as untagged.
	port := openIn(t, p.b, p.v.B, Config{Attach: AttachGeneric, Filter: filter})
	if err := p.tp.VLANAccess(p.a, p.v.A, 100, false); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 2048)
	n := udpFrame(b, p.macA, p.macB, netip.AddrPortFrom(p.ipA, 4000), netip.AddrPortFrom(p.ipB, 5000), []byte("unseen-tag"))
	testenv.SendFrames(t, p.a, p.v.A, b[:n])
	if receiveMarked(port, []byte("unseen-tag"), 3*time.Second) == nil {
		t.Error("a generic-XDP port on veth did not take a frame tagged as metadata; if the kernel now shows the tag, StrippedTags can say none here")
	}
}

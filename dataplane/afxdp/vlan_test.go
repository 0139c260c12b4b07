//go:build linux

package afxdp

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/safchain/ethtool"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
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
		// The other end is in another namespace: its offload is not
		// read, and the reason says so (isolation holds with it off).
		if s, why := port.StrippedTags(); s != StrippedTagsUnseen || !strings.Contains(why, "veth") || !strings.Contains(why, "another network namespace") {
			t.Errorf("generic on veth, keep offload %v: StrippedTags() = %v (%s), want unseen, naming the veth and its other end's namespace", keep, s, why)
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

// TestStrippedTagsVethPeerOffloadOff: a veth whose other end (in this
// namespace) has TX VLAN offload off carries every tag in the frame,
// which generic XDP reads: StrippedTags says none, and a frame its
// other end tags (a TC program there pushes the tag: the kernel writes it
// into the frame) is not taken by an untagged filter. With the offload on,
// the error's fix names that end's offload (it told to turn this end's
// RX offload off, which changes nothing on a veth).
func TestStrippedTagsVethPeerOffloadOff(t *testing.T) {
	tp := testenv.Topology(t, "xdp")
	a := testenv.NS(t, tp, "a")
	v, err := tp.NewVeth(a, a, topo.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ipA, ipB := netip.MustParseAddr("198.18.7.1"), netip.MustParseAddr("198.18.7.2")
	if err := a.AddAddr(v.B, "198.18.7.2/24"); err != nil {
		t.Fatal(err)
	}
	macA, err := a.LinkMAC(v.A)
	if err != nil {
		t.Fatal(err)
	}
	macB, err := a.LinkMAC(v.B)
	if err != nil {
		t.Fatal(err)
	}
	filter := Filter{UDP: []UDPMatch{{Addr: ipB, PortLo: 5000, PortHi: 5000}}}

	port := openIn(t, a, v.B, Config{Attach: AttachGeneric, Filter: filter})
	if s, why := port.StrippedTags(); s != StrippedTagsUnseen {
		t.Errorf("other end's TX VLAN offload on: StrippedTags() = %v (%s), want unseen", s, why)
	}
	var logged strings.Builder
	port.LogStrippedTags(slog.New(slog.NewTextHandler(&logged, nil)), "LAN")
	if want := "ethtool -K " + v.A + " txvlan off tx-vlan-stag-hw-insert off"; !strings.Contains(logged.String(), want) {
		t.Errorf("LogStrippedTags = %s, want the fix %q", logged.String(), want)
	}
	port.Close()

	if err := a.Do(func() error {
		e, err := ethtool.NewEthtool()
		if err != nil {
			return err
		}
		defer e.Close()
		return e.Change(v.A, map[string]bool{"tx-vlan-hw-insert": false, "tx-vlan-stag-hw-insert": false})
	}); err != nil {
		t.Fatal(err)
	}
	port = openIn(t, a, v.B, Config{Attach: AttachGeneric, Filter: filter})
	if s, why := port.StrippedTags(); s != StrippedTagsNone || !strings.Contains(why, v.A) {
		t.Errorf("other end's TX VLAN offload off: StrippedTags() = %v (%s), want none, naming %s", s, why, v.A)
	}
	// Untagged, the frame is taken (the port works); tagged by the
	// other end, it is not.
	b := make([]byte, 2048)
	n := udpFrame(b, macA, macB, netip.AddrPortFrom(ipA, 4000), netip.AddrPortFrom(ipB, 5000), []byte("untagged"))
	testenv.SendFrames(t, a, v.A, b[:n])
	if receiveMarked(port, []byte("untagged"), 3*time.Second) == nil {
		t.Fatal("the untagged frame did not arrive")
	}
	if err := tp.VLANAccess(a, v.A, 100, false); err != nil {
		t.Fatal(err)
	}
	n = udpFrame(b, macA, macB, netip.AddrPortFrom(ipA, 4000), netip.AddrPortFrom(ipB, 5000), []byte("seen-tag"))
	testenv.SendFrames(t, a, v.A, b[:n])
	if got := receiveMarked(port, []byte("seen-tag"), time.Second); got != nil {
		t.Errorf("a frame of VLAN 100 was taken by an untagged port: % x", got[:18])
	}
}

// TestOffloadRestoredAfterRename: RX VLAN offload, which Open turns off,
// is on again after Close on an interface renamed while the port was
// open (ip link set DEV name NEW), as the port follows it by its index.
// Close turned it back on by the name Open was given: the rename left it
// off, and Close failed with "no such device".
func TestOffloadRestoredAfterRename(t *testing.T) {
	p := newVethPair(t, 1)
	offload := func(dev string) bool {
		var on bool
		if err := p.b.Do(func() error {
			e, err := ethtool.NewEthtool()
			if err != nil {
				return err
			}
			defer e.Close()
			f, err := e.Features(dev)
			on = f["rx-vlan-hw-parse"]
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return on
	}
	if !offload(p.v.B) {
		t.Fatal("veth's rx-vlan-hw-parse is off before the test; want veth's default, on")
	}
	port := openIn(t, p.b, p.v.B, Config{Attach: AttachGeneric, Filter: Filter{UDP: []UDPMatch{{Addr: p.ipB, PortLo: 5000, PortHi: 5000}}}})
	if offload(p.v.B) {
		t.Fatal("rx-vlan-hw-parse is on while the port is open")
	}
	renamed := p.tp.Name("r")
	for _, args := range [][]string{
		{"link", "set", "dev", p.v.B, "down"},
		{"link", "set", "dev", p.v.B, "name", renamed},
		{"link", "set", "dev", renamed, "up"},
	} {
		if out, err := p.b.Run("ip", args...); err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}
	if err := port.Close(); err != nil {
		t.Errorf("Close after %s was renamed %s: %v", p.v.B, renamed, err)
	}
	if !offload(renamed) {
		t.Errorf("rx-vlan-hw-parse of %s (renamed from %s while the port was open) still off after Close", renamed, p.v.B)
	}
}

//go:build linux

package afxdp

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"

	"github.com/wgpio/wgpio/internal/testenv"
)

// TestFilterPriorityTags: an outer tag of VID 0 that is not a lone 802.1Q
// one (802.1ad, or 802.1Q in front of another tag), which Linux reads as a
// priority tag, is taken off, and the frame judged by what follows, for
// the socket and the kernel alike; passed with its tag, a LAN host's frame
// of 802.1ad VID 0 to a peer's prefix was routed by the host's kernel,
// in compat mode out of the WAN unencrypted. The frame the program hands
// on has lost the tag and nothing else.
func TestFilterPriorityTags(t *testing.T) {
	testenv.Root(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	for _, vlan := range []uint16{0, 100} {
		f := Filter{
			UDP:      []UDPMatch{{Addr: netip.MustParseAddr("198.18.0.1"), PortLo: 51820, PortHi: 51820}},
			Prefixes: true,
			VLAN:     vlan,
		}
		prog, err := newProgram(f, ourMAC, 4, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer prog.Close()
		m, k, err := prog.prefixKey(netip.MustParsePrefix("198.19.1.0/24"))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Put(k, uint32(1)); err != nil {
			t.Fatal(err)
		}
		udp4 := cat(ip4hdr(17, "198.18.0.1", 0, 40), udp(51820))
		lan4 := cat(ip4hdr(6, "198.19.1.5", 0, 40), udp(80))
		tag := func(tpid, tci uint16) []byte { return []byte{byte(tpid >> 8), byte(tpid), byte(tci >> 8), byte(tci)} }
		macs := eth(ourMAC, 0, false)[:12]
		// ourTag is the tag the filter takes in front of the EtherType:
		// none, or one 802.1Q tag of the VLAN.
		var ourTag []byte
		if vlan != 0 {
			ourTag = tag(0x8100, vlan)
		}
		// In front of what the filter takes, a tag of VID 0 (priority
		// 5) that parse alone would pass.
		for _, c := range []struct {
			name        string
			outer, rest []byte
			want        string
		}{
			{"lan4 802.1ad vid 0", tag(0x88a8, 0xa000), cat([]byte{0x08, 0}, lan4), redirect},
			{"udp4 802.1ad vid 0", tag(0x88a8, 0), cat([]byte{0x08, 0}, udp4), redirect},
			{"lan4 802.1q vid 0, 802.1ad vid 0", cat(tag(0x8100, 0), tag(0x88a8, 0)), cat([]byte{0x08, 0}, lan4), redirect},
			// Linux takes every VID-0 tag off, the program two:
			// one more is dropped (passed, it was routed as
			// untagged, in compat mode out of the WAN unencrypted).
			{"lan4 802.1ad vid 0 thrice", cat(tag(0x88a8, 0), tag(0x88a8, 0), tag(0x88a8, 0)), cat([]byte{0x08, 0}, lan4), dropVLAN},
			{"udp4 802.1ad vid 0 thrice", cat(tag(0x88a8, 0), tag(0x88a8, 0), tag(0x88a8, 0x4000)), cat([]byte{0x08, 0}, udp4), dropVLAN},
			{"lan4 802.1q vid 0 four times", cat(tag(0x8100, 0), tag(0x8100, 0), tag(0x8100, 0), tag(0x8100, 0)), cat([]byte{0x08, 0}, lan4), dropVLAN},
			{"lan4 802.1ad vid 0 twice, 802.1ad vid 7", cat(tag(0x88a8, 0), tag(0x88a8, 0), tag(0x88a8, 7)), cat([]byte{0x08, 0}, lan4), passVLAN},
			{"lan4 802.1ad vid 0 twice", cat(tag(0x88a8, 0), tag(0x88a8, 0x2000)), cat([]byte{0x08, 0}, lan4), redirect},
			{"lan4 802.1ad vid 7", tag(0x88a8, 7), cat([]byte{0x08, 0}, lan4), passVLAN},
		} {
			inner := cat(macs, ourTag, c.rest)
			frame := cat(macs, c.outer, ourTag, c.rest)
			runFilter(t, prog, []filterCase{{name: c.name, frame: frame, want: c.want}})
			if c.want != redirect {
				continue
			}
			out := make([]byte, len(frame)+64)
			opts := ebpf.RunOptions{Data: frame, DataOut: out}
			if _, err := prog.prog.Run(&opts); err != nil {
				t.Fatal(err)
			}
			if got := opts.DataOut; !bytes.Equal(got, inner) {
				t.Errorf("VLAN %d, %s: frame handed on\n% x\nwant (the tag gone)\n% x", vlan, c.name, got, inner)
			}
		}
		// Stacked VID-0 tags in front of ours: one taken off, the next
		// stepped over (VLAN 0) or taken as not ours.
		frame := cat(macs, tag(0x8100, 0), tag(0x8100, vlan), []byte{0x08, 0}, lan4)
		runFilter(t, prog, []filterCase{{name: "lan4 stacked", frame: frame, want: redirect}})
	}
}

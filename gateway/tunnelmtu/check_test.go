package tunnelmtu

import (
	"errors"
	"strings"
	"testing"
)

// compat is compat mode's Limits (compatgw's wanLimits).
var compat = Limits{Least: 68, MaxFragments: 64, Dropped: "the bind's too_big"}

// afxdpMaxFrame is the largest frame, bytes, that the gateways' AF_XDP
// ports take on dataplane.DefaultFrameSize chunks (afxdp.MaxFrameLen,
// checked on Linux by TestAFXDPMaxFrame).
const afxdpMaxFrame = 3836

// TestOuterOverhead: the kernel's WireGuard takes 80 bytes off a 1500-byte
// MTU for its default of 1420 (IPv6 outer headers); IPv4's are 20 shorter.
func TestOuterOverhead(t *testing.T) {
	if OuterOverhead4 != 60 || OuterOverhead6 != 80 {
		t.Errorf("OuterOverhead4, OuterOverhead6 = %d, %d, want 60, 80", OuterOverhead4, OuterOverhead6)
	}
}

// TestCheckWAN: the tunnel MTU plus 60 (IPv4) or 80 (IPv6) bytes of outer
// headers against the WAN MTU: a warning with the numbers, the families
// whose full-size packets leave as fragments and the MTU that fits them
// all; nothing when they fit.
func TestCheckWAN(t *testing.T) {
	for _, tt := range []struct {
		name        string
		tunnel, wan int
		vid         uint16
		v4, v6      bool
		want        string // substring; "" for no warning
	}{
		{"default fits both", 1420, 1500, 0, true, true, ""},
		{"ipv4 exactly", 1440, 1500, 0, true, false, ""},
		{"ipv4 one over", 1441, 1500, 0, true, false, "tunnel MTU 1441 + 60 bytes of outer IPv4, UDP and WireGuard headers = 1501, more than the MTU 1500 of WAN eth0"},
		{"ipv4 over: fragments to IPv4 peers", 1441, 1500, 0, true, false, "full-size tunnel packets to IPv4 peers leave as IP fragments"},
		{"ipv4 over with ipv6 too", 1441, 1500, 0, true, true, "to IPv4 and IPv6 peers leave as IP fragments, as Linux's WireGuard sends them: each is cut into 2 of at most 1500 bytes (more frames, reassembled by the peer, lost on paths that drop fragments); lower MTU in [Interface] to 1420"},
		{"ipv6 only over", 1421, 1500, 0, false, true, "= 1501, more than the MTU 1500"},
		{"both: ipv6 over", 1440, 1500, 0, true, true, "to IPv6 peers leave as IP fragments"},
		{"pppoe", 1420, 1492, 0, true, true, "to IPv6 peers leave as IP fragments, as Linux's WireGuard sends them: each is cut into 2 of at most 1492 bytes (more frames, reassembled by the peer, lost on paths that drop fragments); lower MTU in [Interface] to 1412 or raise the WAN MTU"},
		{"pppoe ipv4 only fits", 1420, 1492, 0, true, false, ""},
		{"vlan frame size", 1441, 1500, 100, true, false, "(were it sent whole, a frame of 1519 bytes with the Ethernet header and the 802.1Q tag)"},
		// The tag lengthens the frame, not the IP packet: 1440 + 60 fits
		// a 1500 MTU on a VLAN too.
		{"vlan tag does not count against the MTU", 1440, 1500, 100, true, false, ""},
		{"vlan ipv6", 1440, 1500, 100, true, true, "= 1520, more than the MTU 1500 of WAN eth0 (were it sent whole, a frame of 1538 bytes"},
		// Both families over: both sums, since the MTU offered is IPv6's.
		{"both over: both sums", 1420, 1400, 0, true, true, "= 1480, more than the MTU 1400 of WAN eth0 (were it sent whole, a frame of 1494 bytes with the Ethernet header), and + 80 bytes of outer IPv6 headers = 1500: " +
			"full-size tunnel packets to IPv4 and IPv6 peers leave as IP fragments"},
		// A WAN MTU so small that the MTU that fits would be below the
		// least tunnel MTU (68): none is offered, the WAN MTU must rise.
		{"ipv4 at the least mtu", 1420, 68, 0, true, false, "; no tunnel MTU fits (the least is 68, whose packets need a WAN MTU of 128): raise the WAN MTU"},
		{"both at the least mtu", 1420, 68, 0, true, true, "; no tunnel MTU fits (the least is 68, whose packets need a WAN MTU of 148): raise the WAN MTU"},
		{"ipv4 fits the least exactly", 1420, 128, 0, true, false, "lower MTU in [Interface] to 68 or raise the WAN MTU"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := CheckWAN(tt.tunnel, tt.wan, "eth0", tt.vid, tt.v4, tt.v6, compat)
			switch {
			case tt.want == "" && w != "":
				t.Errorf("CheckWAN = warning %q, want none", w)
			case tt.want != "" && !strings.Contains(w, tt.want):
				t.Errorf("CheckWAN = warning %q, want one containing %q", w, tt.want)
			}
		})
	}
}

// TestCheckWANFragments: a full-size tunnel packet that needs more
// fragments than the gateway cuts one into (compat's bind: 64; the fast
// path: 128), or that the WAN MTU cannot fragment at all, is dropped, and
// the warning says so and names the counter; it said such packets left as
// fragments. A family within the limit still leaves as fragments.
func TestCheckWANFragments(t *testing.T) {
	fast := Limits{Least: 576, MaxFragments: 128, Dropped: "too_long at the WAN port"}
	for _, tt := range []struct {
		name        string
		tunnel, wan int
		v6          bool
		lim         Limits
		want        string // substring
		fragmented  bool   // the warning says they leave as fragments
	}{
		// 3,140 bytes of data in fragments of 48: 66.
		{"compat over 64", 3100, 68, false, compat, "full-size tunnel packets to IPv4 peers would need 66 fragments each, more than the 64 this gateway cuts a packet into: they are dropped (the bind's too_big)", false},
		{"compat at 64", 3000, 68, false, compat, "full-size tunnel packets to IPv4 peers leave as IP fragments", true},
		{"fast path takes 66", 3100, 68, false, fast, "full-size tunnel packets to IPv4 peers leave as IP fragments", true},
		// 1,460 bytes of data in fragments of 8: 183.
		{"fast path over 128", 1420, 28, false, fast, "would need 183 fragments each, more than the 128 this gateway cuts a packet into: they are dropped (too_long at the WAN port)", false},
		{"no room for data", 1420, 27, false, compat, "full-size tunnel packets to IPv4 peers cannot be fragmented at this MTU (no room for 8 bytes of data beside the headers): they are dropped (the bind's too_big)", false},
		// IPv6's fragmentable 1,460 bytes in fragments of 8 (an MTU of 56): 183;
		// IPv4's in 32: 46.
		{"ipv6 dropped, ipv4 fragmented", 1420, 56, true, compat, "full-size tunnel packets to IPv4 peers leave as IP fragments, as Linux's WireGuard sends them: each is cut into 46 of at most 56 bytes (more frames, reassembled by the peer, lost on paths that drop fragments); " +
			"those to IPv6 peers would need 183 fragments each, more than the 64 this gateway cuts a packet into: they are dropped (the bind's too_big)", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := CheckWAN(tt.tunnel, tt.wan, "eth0", 0, true, tt.v6, tt.lim)
			if !strings.Contains(w, tt.want) {
				t.Errorf("CheckWAN = warning %q, want one containing %q", w, tt.want)
			}
			if got := strings.Contains(w, "leave as IP fragments"); got != tt.fragmented {
				t.Errorf("CheckWAN = warning %q: says they leave as fragments %v, want %v", w, got, tt.fragmented)
			}
		})
	}
}

// TestOuterFragments: the count the warning gives is the fragmenters'
// (header.IPv4Fragmenter, header.IPv6Fragmenter), at the MTUs where it
// steps.
func TestOuterFragments(t *testing.T) {
	for _, tt := range []struct {
		v6         bool
		total, mtu int
		want       int
	}{
		{false, 1480, 1500, 1}, {false, 1480, 1479, 2}, {false, 1480, 68, 31}, {false, 1480, 28, 183}, {false, 1480, 27, 0},
		{true, 1500, 1500, 1}, {true, 1500, 1280, 2}, {true, 1500, 56, 183}, {true, 1500, 55, 0},
		{false, 65536, 1500, 0},
	} {
		if got := outerFragments(tt.v6, tt.total, tt.mtu); got != tt.want {
			t.Errorf("outerFragments(v6 %v, %d bytes, MTU %d) = %d, want %d", tt.v6, tt.total, tt.mtu, got, tt.want)
		}
	}
}

// TestCheckWANWords: the frame size reads as the frame the packet would
// take were it sent whole, not as the WAN's frames (a network engineer
// read "frames of 1494 bytes" as the link's), nor as what is sent ("sent
// whole, a frame of 1494 bytes", then "leave as IP fragments", read as a
// contradiction): the fragments each packet is cut into follow, as many
// as the gateway cuts (outerFragments) and at most the WAN MTU each.
func TestCheckWANWords(t *testing.T) {
	w := CheckWAN(1420, 1400, "eth0", 0, true, false, compat)
	for _, want := range []string{
		"more than the MTU 1400 of WAN eth0 (were it sent whole, a frame of 1494 bytes with the Ethernet header)",
		"leave as IP fragments, as Linux's WireGuard sends them: each is cut into 2 of at most 1400 bytes",
	} {
		if !strings.Contains(w, want) {
			t.Errorf("CheckWAN = warning %q, want one containing %q", w, want)
		}
	}
	if strings.Contains(w, "(sent whole") {
		t.Errorf("CheckWAN = warning %q, saying the packet is sent whole", w)
	}
	// Families cut into different numbers of fragments: each's.
	w = CheckWAN(1420, 1000, "eth0", 0, true, true, compat)
	if want := "each is cut into 2 (IPv4) or 2 (IPv6)"; strings.Contains(w, want) {
		t.Errorf("CheckWAN = warning %q, giving equal counts apart", w)
	}
	w = CheckWAN(1420, 760, "eth0", 0, true, true, compat)
	if want := "each is cut into 2 (IPv4) or 3 (IPv6) of at most 760 bytes"; !strings.Contains(w, want) {
		t.Errorf("CheckWAN = warning %q, want one containing %q", w, want)
	}
	if strings.Contains(w, "frames of") {
		t.Errorf("CheckWAN = warning %q, speaking of \"frames of\"", w)
	}
}

// TestCheckWANLeast: a gateway whose least tunnel MTU is higher (the fast
// path's 576, or 1280 with IPv6) is never offered an MTU below it: at a
// WAN MTU of 1300 with IPv6 endpoints it was offered 1220, which the
// configuration refuses with an IPv6 Address and the fast path with an
// IPv6 WAN address.
func TestCheckWANLeast(t *testing.T) {
	for _, tt := range []struct {
		name  string
		wan   int
		v6    bool
		least int
		want  string
	}{
		{"ipv6 wan at 1300", 1300, true, 1280, "no tunnel MTU fits (the least is 1280, whose packets need a WAN MTU of 1360): raise the WAN MTU"},
		{"ipv6 wan at 1360", 1360, true, 1280, "lower MTU in [Interface] to 1280 or raise the WAN MTU"},
		{"ipv4 wan at 600", 600, false, 576, "no tunnel MTU fits (the least is 576, whose packets need a WAN MTU of 636): raise the WAN MTU"},
		{"ipv4 wan at 1300", 1300, false, 576, "lower MTU in [Interface] to 1240 or raise the WAN MTU"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if w := CheckWAN(1420, tt.wan, "eth0", 0, true, tt.v6, Limits{Least: tt.least, MaxFragments: 128, Dropped: "too_long"}); !strings.Contains(w, tt.want) {
				t.Errorf("CheckWAN = warning %q, want one containing %q", w, tt.want)
			}
		})
	}
}

// TestCheckFrames: the tunnel MTU's WAN frames and the LAN MTU's frames
// against the longest frame an AF_XDP port takes (3,836 bytes with 4 KiB
// chunks). A jumbo LAN (MTU 9000) whose frames toward the tunnel the
// kernel dropped at the socket, unseen and unanswered, is warned about; a
// tunnel MTU whose packets could never be sent is refused.
func TestCheckFrames(t *testing.T) {
	const maxFrame = afxdpMaxFrame
	for _, tt := range []struct {
		name           string
		tunnel, lan    int
		wanVID, lanVID uint16
		v4, clamp      bool
		wantErr, wantW string // substrings; "" for none
	}{
		{"defaults", 1420, 1500, 0, 0, true, true, "", ""},
		{"ipv4 tunnel exactly", 3762, 1500, 0, 0, true, true, "", ""},
		{"ipv4 tunnel one over", 3763, 1500, 0, 0, true, true, "tunnel MTU 3763 makes WAN frames of 3837 bytes (60 of outer IPv4, UDP and WireGuard headers, the Ethernet header), more than the 3836", ""},
		{"ipv6-only tunnel", 3743, 1500, 0, 0, false, true, "lower MTU in [Interface] to 3742", ""},
		{"wan tag", 3762, 1500, 100, 0, true, true, "lower MTU in [Interface] to 3758", ""},
		{"jumbo tunnel", 9000, 9000, 0, 0, true, true, "to 3762", ""},
		{"lan exactly", 1420, 3822, 0, 0, true, true, "", ""},
		{"jumbo lan", 1420, 9000, 0, 0, true, true, "", "LAN eth1 has MTU 9000 (frames of 9014 bytes), more than the 3836 bytes"},
		{"lan tag", 1420, 3822, 0, 200, true, true, "", "lower the LAN MTU to 3818"},
		{"jumbo lan offers the clamp", 1420, 9000, 0, 0, true, true, "", "lower the LAN MTU to 3822, or set MSSClamp = auto in [WGPIO]"},
		// Compat mode: wireguard-go clamps nothing, so the warning ends
		// with the one fix it has.
		{"jumbo lan without a clamp", 1420, 9000, 0, 0, true, false, "", "so their senders get no \"fragmentation needed\" and path MTU discovery fails; lower the LAN MTU to 3822"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w, err := CheckFrames(tt.tunnel, tt.lan, "eth1", tt.wanVID, tt.lanVID, tt.v4, !tt.v4, maxFrame, tt.clamp)
			if !tt.clamp && strings.Contains(w, "MSSClamp") {
				t.Errorf("CheckFrames(clamp false) = warning %q, offering MSSClamp", w)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("CheckFrames = error %v, want none", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("CheckFrames = error %v, want one containing %q", err, tt.wantErr)
			case err != nil && !errors.As(err, new(*MTUError)):
				t.Errorf("CheckFrames = error %T, want *MTUError", err)
			case tt.wantW == "" && w != "":
				t.Errorf("CheckFrames = warning %q, want none", w)
			case tt.wantW != "" && !strings.Contains(w, tt.wantW):
				t.Errorf("CheckFrames = warning %q, want one containing %q", w, tt.wantW)
			}
		})
	}
}

// TestCheckFramesFamilies: each family the WAN has is checked against
// the AF_XDP frame, IPv6's as IPv4's: with both, a tunnel MTU whose IPv6
// frames no AF_XDP frame holds is refused as an IPv4-only one is (it was
// checked for IPv4 alone, and IPv6 peers' full-size packets were lost
// unwarned); the MTU offered fits both.
func TestCheckFramesFamilies(t *testing.T) {
	for _, tt := range []struct {
		name    string
		tunnel  int
		v4, v6  bool
		wantErr string // substring; "" for none
	}{
		{"ipv4 fits", 3762, true, false, ""},
		{"ipv4 over", 3763, true, false, "(60 of outer IPv4, UDP and WireGuard headers, the Ethernet header), more than the 3836 an AF_XDP frame holds: full-size tunnel packets to IPv4 peers could never be sent; lower MTU in [Interface] to 3762"},
		{"ipv6 fits", 3742, false, true, ""},
		{"ipv6 over", 3743, false, true, "tunnel MTU 3743 makes WAN frames of 3837 bytes (80 of outer IPv6, UDP and WireGuard headers, the Ethernet header), more than the 3836 an AF_XDP frame holds: full-size tunnel packets to IPv6 peers could never be sent; lower MTU in [Interface] to 3742"},
		{"both fit", 3742, true, true, ""},
		{"both: ipv6 over", 3743, true, true, "full-size tunnel packets to IPv6 peers could never be sent; lower MTU in [Interface] to 3742"},
		{"both over", 3763, true, true, "tunnel MTU 3763 makes WAN frames of 3857 bytes (80 of outer IPv6, UDP and WireGuard headers, the Ethernet header), more than the 3836 an AF_XDP frame holds: full-size tunnel packets to IPv4 and IPv6 peers could never be sent; lower MTU in [Interface] to 3742"},
		{"no address: ipv6's", 3743, false, false, "to IPv6 peers could never be sent"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CheckFrames(tt.tunnel, 1500, "eth1", 0, 0, tt.v4, tt.v6, afxdpMaxFrame, true)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("CheckFrames = error %v, want none", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("CheckFrames = error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestHoldLANMTU: a LAN MTU changed at run time is taken up to the largest
// MTU the port's frames hold, and above it held there with a warning that
// names what fails and the fix.
func TestHoldLANMTU(t *testing.T) {
	const most = 3822
	for _, tt := range []struct {
		mtu, want int
		warn      bool
	}{{1280, 1280, false}, {1500, 1500, false}, {most, most, false}, {most + 1, most, true}, {9000, most, true}} {
		held, warn := HoldLANMTU(tt.mtu, most)
		if held != tt.want || (warn != "") != tt.warn {
			t.Errorf("HoldLANMTU(%d, %d) = %d, %q; want %d, a warning %v", tt.mtu, most, held, warn, tt.want, tt.warn)
		}
		if tt.warn && (!strings.Contains(warn, "xsk_rx_dropped") || !strings.Contains(warn, "lower the LAN MTU")) {
			t.Errorf("HoldLANMTU(%d) warning %q: want the counter and the fix named", tt.mtu, warn)
		}
	}
}

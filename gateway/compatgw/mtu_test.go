//go:build linux

package compatgw

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/gateway/tunnelmtu"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
)

// TestStartMTU: Start refuses a tunnel MTU whose full-size packets an
// AF_XDP frame cannot carry, with fastgw's message in a
// *tunnelmtu.MTUError and nothing attached to the interfaces; it starts,
// with a warning that full-size packets leave as IP fragments, when they
// do not fit the WAN MTU whole (before, it refused), and with one that
// offers MSSClamp = auto on a jumbo LAN. The gateway's
// namespace has a WAN (198.18.0.1/24) and a LAN veth to a peer namespace.
func TestStartMTU(t *testing.T) {
	for _, tt := range []struct {
		name             string
		tunnel, wan, lan int
		wantErr          string // the whole error; "%s" is the WAN's name
		wantWarn         string // in the log when Start succeeds; "%s" is the LAN's name
		wantWANWarn      string // in the log when Start succeeds; "%s" is the WAN's name
	}{
		{name: "wan 1500", tunnel: 1480, wan: 1500, lan: 1500,
			wantWANWarn: "tunnel MTU 1480 + 60 bytes of outer IPv4, UDP and WireGuard headers = 1540, more than the MTU 1500 of WAN %s (were it sent whole, a frame of 1554 bytes with the Ethernet header): " +
				"full-size tunnel packets to IPv4 peers leave as IP fragments, as Linux's WireGuard sends them: each is cut into 2 of at most 1500 bytes (more frames, reassembled by the peer, lost on paths that drop fragments); " +
				"lower MTU in [Interface] to 1440 or raise the WAN MTU"},
		{name: "afxdp frame", tunnel: 9000, wan: 9100, lan: 1500,
			wantErr: "compatgw: tunnel MTU 9000 makes WAN frames of 9074 bytes (60 of outer IPv4, UDP and WireGuard headers, the Ethernet header), more than the 3836 an AF_XDP frame holds: " +
				"full-size tunnel packets to IPv4 peers could never be sent; lower MTU in [Interface] to 3762"},
		{name: "jumbo lan", tunnel: 1420, wan: 1500, lan: 9000,
			wantWarn: "LAN %s has MTU 9000 (frames of 9014 bytes), more than the 3836 bytes an AF_XDP frame holds"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tp := testenv.Topology(t, "cgm")
			gw, peer := testenv.NS(t, tp, "g"), testenv.NS(t, tp, "p")
			wan, err := tp.NewVeth(gw, peer, topo.VethConfig{MTU: tt.wan})
			if err != nil {
				t.Fatal(err)
			}
			lan, err := tp.NewVeth(gw, peer, topo.VethConfig{MTU: tt.lan})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range []struct {
				ns        *topo.NS
				dev, cidr string
			}{
				{gw, wan.A, "198.18.0.1/24"}, {peer, wan.B, "198.18.0.2/24"},
				{gw, lan.A, "198.18.1.1/24"}, {peer, lan.B, "198.18.1.2/24"},
			} {
				if err := a.ns.AddAddr(a.dev, a.cidr); err != nil {
					t.Fatal(err)
				}
			}
			var logs testenv.LogBuffer
			cfg := Config{
				Name: topo.UniqueName("wgpm"), ListenPort: 51820, WAN: wan.A, LAN: lan.A, MTU: tt.tunnel,
				// Generic XDP: native XDP on veth takes no MTU above 3506.
				Attach: afxdp.AttachGeneric,
				UAPI:   "private_key=" + strings.Repeat("11", 32) + "\nlisten_port=51820\n",
				Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			}
			var g *Gateway
			err = gw.Do(func() (err error) {
				g, err = Start(cfg)
				return err
			})
			if g != nil {
				defer g.Close()
			}
			if tt.wantErr != "" {
				want := tt.wantErr
				if strings.Contains(want, "%s") {
					want = fmt.Sprintf(want, wan.A)
				}
				if err == nil || err.Error() != want || !errors.As(err, new(*tunnelmtu.MTUError)) {
					t.Fatalf("Start(MTU %d, WAN MTU %d) = %v,\nwant a *tunnelmtu.MTUError %q", tt.tunnel, tt.wan, err, want)
				}
				for _, dev := range []string{wan.A, lan.A} {
					if out, _ := gw.Run("ip", "link", "show", "dev", dev); strings.Contains(out, "xdp") {
						t.Errorf("XDP attached to %s after the refused Start:\n%s", dev, out)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Start(MTU %d, LAN MTU %d) = %v, want it running with a warning", tt.tunnel, tt.lan, err)
			}
			l := logs.String()
			if tt.wantWANWarn != "" {
				if want := fmt.Sprintf(tt.wantWANWarn, wan.A); !strings.Contains(l, want) {
					t.Errorf("Start(MTU %d, WAN MTU %d) logged:\n%s\nwant a warning containing %q", tt.tunnel, tt.wan, l, want)
				}
			} else if !strings.Contains(l, fmt.Sprintf(tt.wantWarn, lan.A)) || !strings.Contains(l, "MSSClamp = auto") {
				t.Errorf("Start(LAN MTU %d) logged:\n%s\nwant a warning containing %q that offers MSSClamp = auto (the LAN's PortDevice clamps)", tt.lan, l, fmt.Sprintf(tt.wantWarn, lan.A))
			}
			// The LAN is a veth: its hosts' partial checksums would cross
			// the tunnel as they are, as in fast-path mode.
			if !strings.Contains(l, "interface is a veth") || !strings.Contains(l, "interface="+lan.A) {
				t.Errorf("Start on veths logged:\n%s\nwant the warning that hosts on the LAN veth %s must turn TX checksum offload off", l, lan.A)
			}
		})
	}
}

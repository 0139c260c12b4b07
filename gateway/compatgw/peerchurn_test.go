//go:build linux

package compatgw

import (
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/twosite"
	"github.com/wgpio/wgpio/tundev"
)

// TestPeerChurnNoCleartext: site B's peer is removed and added again six
// times over the UAPI socket (wg set) while a peer of a nested prefix of
// its networks (198.19.2.128/25, never heard from) comes and goes: the
// LAN's traffic to the removed networks, and to the nested prefix once
// its peer is gone too, is dropped and counted (no_route) by the
// PortDevice, never carried out of the WAN in cleartext by the host's
// default route; traffic to the nested prefix while its peer is there
// goes to wireguard-go, and site B is reached again after each addition.
func TestPeerChurnNoCleartext(t *testing.T) {
	testenv.Short(t, "builds namespaces and runs two gateways")
	tcpdump := testenv.Tool(t, "tcpdump", "tcpdump")
	wgBin := testenv.Tool(t, "wg", "wireguard-tools")
	testenv.Tool(t, "ping", "iputils-ping")
	s, g, wan := routedCompat(t, "cc", tcpdump, nil)
	wg := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(wgBin, append([]string{"set", s.GwName}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("wg set %v: %v\n%s", args, err, out)
		}
	}
	noRoute := func() uint64 { return g.Stats().LAN.Drops[tundev.PortDropNoRoute] }
	read := func() uint64 { return g.Stats().LAN.RXPackets }
	p := s.FastConfig.Peers[0]
	var allowed []string
	for _, a := range p.AllowedIPs {
		allowed = append(allowed, a.String())
	}
	nested := "fPmNcx0FIvqkJcNMDAsQhrNKbzHPCGCcqcjmS3Sg7nY="
	inNested := netip.MustParseAddr("198.19.2.200")
	const n = 20
	want := uint64(0)
	// expect waits until no_route reaches want and Read has returned
	// wantRead packets, then checks no_route. The wait for the reads
	// matters: the datagrams to the nested prefix, sent while its peer is
	// there, may still be in the LAN's ring when the next step removes
	// that peer, and would then be dropped too (rightly: the route is
	// looked up when the packet is read), which a busy machine showed.
	var wantRead uint64
	expect := func(what string) {
		t.Helper()
		testenv.PollUntil(5*time.Second, func() bool { return noRoute() >= want && read() >= wantRead })
		if got := noRoute(); got != want {
			st := g.Stats().LAN
			t.Fatalf("%s: no_route %d, want %d; LAN: %d read, drops %v", what, got, want, st.RXPackets, st.Drops.List())
		}
	}
	for round := range 6 {
		wg("peer", nested, "allowed-ips", "198.19.2.128/25")
		wg("peer", p.PublicKey.String(), "remove")
		wantRead = read() + n
		testenv.SendUDP(t, s.HostA, netip.AddrPortFrom(twosite.HostB4, 9305), n)
		testenv.SendUDP(t, s.HostA, netip.AddrPortFrom(inNested, 9305), n) // to wireguard-go's nested peer
		want += n
		expect("site B's peer removed")
		if round%2 == 0 {
			wg("peer", nested, "remove")
			testenv.SendUDP(t, s.HostA, netip.AddrPortFrom(inNested, 9305), n)
			want += n
			expect("the nested prefix's peer removed too")
		}
		wg("peer", p.PublicKey.String(), "allowed-ips", strings.Join(allowed, ","), "endpoint", p.Endpoint.String())
		if err := s.HostA.Ping(twosite.HostB4, 15*time.Second); err != nil {
			t.Fatalf("round %d, after the peer came back: %v", round, err)
		}
	}
	frames, leaks := wanLeaks(t, wan)
	t.Logf("%d frames on the WAN, no_route %d", frames, noRoute())
	if frames == 0 {
		t.Error("the WAN capture holds no frame, not even the tunnel's: the leak check saw nothing")
	}
	if len(leaks) > 0 {
		t.Errorf("%d of the %d frames on the WAN carry an inner address (cleartext); the first: %s", len(leaks), frames, leaks[0])
	}
}

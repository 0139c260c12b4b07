//go:build linux

package main

import (
	"encoding/json"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/internal/twosite"
)

// TestUpCompatMQTUNOuterFragments: `wgpio up` in compat-mqtun mode with
// the WAN's MTU lowered under it (both ends of the link: 1300 with IPv4
// endpoints, 1280 with IPv6 ones) carries host A's 1400-byte pings with
// DF (1460- or 1480-byte outer packets) to stock wireguard-go and back:
// they leave gwA as IP fragments, which the peer's kernel reassembles,
// and none of gwA's outer packets carries DF, as through a Linux wg0
// (ignore_df; README, "MTU"); the UDP sockets count nothing too_big.
// Without fragBind the IPv4 subtest fails: gwA's outer packets that fit
// (handshakes, keepalives, small pings) carry DF. The IPv6 one passes
// without it too (the kernel fragments a datagram sent on its own); what
// it lost there, batches sent with UDP GSO, TestFragBindFragments
// checks, which a ping at a time does not make.
func TestUpCompatMQTUNOuterFragments(t *testing.T) {
	testenv.Tool(t, "tcpdump", "tcpdump")
	for _, tc := range []struct {
		name   string
		cfg    twosite.Config
		low    int
		gwA    string // gwA's WAN address as tcpdump prints it
		fragOf func(rec string) bool
	}{
		{"outer-ipv4", twosite.Config{}, 1300, "198.18.1.1", func(r string) bool {
			return strings.Contains(r, "flags [+]") || laterFragment.MatchString(r)
		}},
		{"outer-ipv6", twosite.Config{Outer6: true}, 1280, "2001:db8:f::1", func(r string) bool { return strings.Contains(r, "frag (") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testUpCompatMQTUNOuterFragments(t, tc.cfg, tc.low, tc.gwA, tc.fragOf)
		})
	}
}

// laterFragment matches tcpdump -v's words for an IPv4 fragment after the
// first.
var laterFragment = regexp.MustCompile(`offset [1-9][0-9]*,`)

func testUpCompatMQTUNOuterFragments(t *testing.T, cfg twosite.Config, low int, gwA string, fragOf func(string) bool) {
	tcpdump := testenv.Tool(t, "tcpdump", "tcpdump")
	s := newSiteWith(t, cfg, func(f *config.File) { f.WGPIO.Mode = config.ModeCompatMQTUN })
	if err := s.GwA.Forwarding(); err != nil {
		t.Fatal(err)
	}
	g := s.up(t)
	defer func() {
		g.cmd.Process.Signal(syscall.SIGTERM)
		<-g.done
	}()
	file := t.TempDir() + "/wan.pcap"
	capture := testenv.StartCapture(t, tcpdump, s.GwA, s.WANA, file, "ip or ip6")
	s.pingBoth(t)
	for _, e := range []struct {
		ns  *topo.NS
		dev string
	}{{s.GwA, s.WANA}, {s.GwB, s.WANB}} {
		if out, err := e.ns.Run("ip", "link", "set", "dev", e.dev, "mtu", strconv.Itoa(low)); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	const n = 3
	out, err := s.HostA.Run("ping", "-c", strconv.Itoa(n), "-i", "0.2", "-W", "5", "-M", "do", "-s", "1372", twosite.HostB4.String())
	if err != nil || !strings.Contains(out, " 0% packet loss") {
		t.Errorf("%d pings of 1400 bytes with DF over a WAN of MTU %d: %v\n%s\n%s", n, low, err, out, g.output())
	}
	// tcpdump -v prints an IPv4 packet on two lines: a record is a
	// packet's lines.
	var recs []string
	fromA := func(r string) bool {
		return strings.Contains(r, " "+gwA+" > ") || strings.Contains(r, " "+gwA+".51820 > ")
	}
	frags := func() (k int) {
		o, _ := exec.Command(tcpdump, "-n", "-v", "-r", file).Output()
		recs = recs[:0]
		for _, l := range strings.Split(string(o), "\n") {
			if l == "" {
				continue
			}
			if l[0] == ' ' || l[0] == '\t' {
				if len(recs) > 0 {
					recs[len(recs)-1] += " " + strings.TrimSpace(l)
				}
				continue
			}
			recs = append(recs, l)
		}
		for _, r := range recs {
			if fromA(r) && fragOf(r) {
				k++
			}
		}
		return k
	}
	// Each ping's outer packet leaves in two fragments; tcpdump writes
	// them a moment later (a bound on its never writing them only).
	testenv.PollUntil(10*time.Second, func() bool { return frags() >= 2*n })
	capture.Stop()
	if got := frags(); got < 2*n {
		t.Errorf("%d outer fragments from gwA for %d pings of 1400 bytes over a WAN of MTU %d, want %d:\n%s", got, n, low, 2*n, strings.Join(recs, "\n"))
	}
	for _, r := range recs {
		if fromA(r) && strings.Contains(r, "[DF]") {
			t.Errorf("an outer packet from gwA with DF: %s", r)
		}
	}
	var st GatewayStats
	o, err := exec.Command(wgpioBin, "stats", "-json", s.GwName).Output()
	if err == nil {
		err = json.Unmarshal(o, &st)
	}
	if err != nil || st.UDP == nil {
		t.Fatalf("wgpio stats -json %s: %v\n%s", s.GwName, err, o)
	}
	if d := st.UDP.Drops[udpDropTooBig]; d != 0 {
		t.Errorf("the UDP sockets' too_big drops = %d, want 0", d)
	}
}

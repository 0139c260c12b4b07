//go:build linux

package fastgw

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/fastpath"
)

func TestConfigWithDefaults(t *testing.T) {
	ok := Config{Name: "wg0", WAN: "eth0", LAN: "eth1"}
	got, err := ok.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if got.ListenPort != 51820 || got.SourcePorts != 1 || got.MTU != fastpath.DefaultMTU {
		t.Errorf("defaults: port %d, source ports %d, MTU %d; want 51820, 1, %d", got.ListenPort, got.SourcePorts, got.MTU, fastpath.DefaultMTU)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no name", func(c *Config) { c.Name = "" }, "a name is required"},
		{"no LAN", func(c *Config) { c.LAN = "" }, "WAN and LAN interfaces are required"},
		{"too many queues", func(c *Config) { c.Queues = 257 }, "257 queues"},
		{"ports past 65535", func(c *Config) { c.ListenPort, c.SourcePorts = 65535, 2 }, "pass 65535"},
		{"owned without addresses", func(c *Config) { c.Owned = true }, "needs WANAddress and LANAddress"},
	} {
		c := ok
		tc.edit(&c)
		if _, err := c.withDefaults(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: withDefaults() = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestQueueCount(t *testing.T) {
	for _, tc := range []struct {
		asked, wq, lq, want int
		warn, err           bool
	}{
		{0, 4, 4, 4, false, false},
		{0, 4, 2, 2, true, false},
		{0, 0, 0, 1, false, false}, // unknown counts: one worker
		{2, 4, 4, 2, true, false},  // fewer workers than queues
		{8, 4, 4, 0, false, true},
		{3, 0, 0, 3, false, false},
	} {
		n, warn, err := queueCount(tc.asked, tc.wq, tc.lq, "wan0", "lan0")
		if n != tc.want || (warn != "") != tc.warn || (err != nil) != tc.err {
			t.Errorf("queueCount(%d, %d, %d) = %d, %q, %v; want %d, warn %v, err %v", tc.asked, tc.wq, tc.lq, n, warn, err, tc.want, tc.warn, tc.err)
		}
	}
}

func TestFilters(t *testing.T) {
	c, err := Config{Name: "wg0", WAN: "eth0", LAN: "eth1", ListenPort: 51820, SourcePorts: 4,
		Addresses: []netip.Prefix{netip.MustParsePrefix("10.8.0.1/24")}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	v4, v6 := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("2001:2::1")
	want := afxdp.Filter{UDP: []afxdp.UDPMatch{{Addr: v4, PortLo: 51820, PortHi: 51823}, {Addr: v6, PortLo: 51820, PortHi: 51823}}}
	if diff := cmp.Diff(want, wanFilter(c, v4, v6, 0), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("wanFilter (-want +got):\n%s", diff)
	}
	// Owned mode: ARP for our address and the neighbours' announcements
	// (gratuitous ARP, unsolicited NA), and the UDP fragments to it (the
	// engine reassembles them; the kernel has no address to).
	owned := c
	owned.Owned, owned.WANAddress = true, netip.PrefixFrom(v4, 24)
	want = afxdp.Filter{UDP: want.UDP[:1], Neighbours: []netip.Addr{v4}, NeighbourUpdates: true, Fragments: true}
	if diff := cmp.Diff(want, wanFilter(owned, v4, netip.Addr{}, 0), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("wanFilter, owned (-want +got):\n%s", diff)
	}
	host := netip.MustParseAddr("198.18.1.1")
	hosts, left := lanHostAddrs(c, []netip.Addr{host}, nil)
	lf := lanFilter(c, hosts, 0)
	if !lf.Prefixes || lf.PrefixCapacity != defaultLANPrefixCapacity || len(lf.HostAddrs) != 2 || len(left) != 0 ||
		lf.HostAddrs[0] != netip.MustParseAddr("10.8.0.1") || lf.HostAddrs[1] != host {
		t.Errorf("lanFilter = %+v, left %v; want the prefix map and host addresses [10.8.0.1 %v], none left", lf, left, host)
	}
}

// TestTunnelQueueKeepsFlows: the exception TUN's packets of one flow go to
// one worker whatever their payload or IP ID (no reordering within a
// flow), and different flows spread.
func TestTunnelQueueKeepsFlows(t *testing.T) {
	udp := func(sport uint16, id uint16, payload byte) []byte {
		p := make([]byte, 20+8+4)
		p[0] = 0x45
		binary.BigEndian.PutUint16(p[2:4], uint16(len(p)))
		binary.BigEndian.PutUint16(p[4:6], id)
		p[8], p[9] = 64, 17
		copy(p[12:16], []byte{10, 8, 0, 1})
		copy(p[16:20], []byte{198, 19, 2, 2})
		binary.BigEndian.PutUint16(p[20:22], sport)
		binary.BigEndian.PutUint16(p[22:24], 53)
		p[28] = payload
		return p
	}
	const workers = 4
	q := tunnelQueue(udp(40000, 1, 0)) % workers
	for i := range 100 {
		if got := tunnelQueue(udp(40000, uint16(i), byte(i))) % workers; got != q {
			t.Fatalf("packet %d of one flow on worker %d, the first on %d", i, got, q)
		}
	}
	seen := map[int]bool{}
	for sport := range uint16(64) {
		seen[tunnelQueue(udp(40000+sport, 1, 0))%workers] = true
	}
	if len(seen) < 2 {
		t.Errorf("64 flows all on one worker of %d", workers)
	}
}

// TestLANHostAddrsLimit: the LAN XDP filter takes the tunnel addresses
// first, then the LAN interface's in order, then the WAN's, each once, at most
// afxdp.MaxHostAddrs of each family; the rest are left out, in order.
func TestLANHostAddrsLimit(t *testing.T) {
	tun := netip.MustParseAddr("10.8.0.1")
	c := Config{Addresses: []netip.Prefix{netip.PrefixFrom(tun, 24)}}
	lan := []netip.Addr{tun, netip.MustParseAddr("2001:2::1")} // the tunnel address again: counted once
	for i := range afxdp.MaxHostAddrs + 10 {
		lan = append(lan, netip.AddrFrom4([4]byte{198, 18, byte(i / 250), byte(1 + i%250)}))
	}
	wan := []netip.Addr{netip.MustParseAddr("2001:2:1::1"), netip.MustParseAddr("198.18.200.1")}
	host, left := lanHostAddrs(c, lan, wan)
	if len(host) != afxdp.MaxHostAddrs+2 || host[0] != tun || host[1] != lan[1] || !slices.Contains(host, wan[0]) {
		t.Errorf("lanHostAddrs: %d host addresses starting %v, want %d starting [%v %v], with the WAN's %v", len(host), host[:2], afxdp.MaxHostAddrs+2, tun, lan[1], wan[0])
	}
	// 255 of the LAN's IPv4 addresses fit beside the tunnel address;
	// the WAN's come after them.
	if want := append(slices.Clone(lan[2+afxdp.MaxHostAddrs-1:]), wan[1]); !slices.Equal(left, want) {
		t.Errorf("lanHostAddrs left out %v, want %v", left, want)
	}
}

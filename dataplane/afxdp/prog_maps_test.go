//go:build linux

package afxdp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
	"github.com/wgpio/wgpio/internal/testenv"
)

// TestMapCallsAfterClose: the calls that change a port's maps (AddPrefix,
// DeletePrefix, SetUDP, SetHostAddrs), made while Close runs or after it
// (a UAPI set or an address change as the gateway stops), return an error
// wrapping net.ErrClosed and touch no file descriptor: they read the maps'
// descriptors as Close closed them (a data race under -race), and one
// reused by then would have been written.
func TestMapCallsAfterClose(t *testing.T) {
	testenv.Root(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	pfx := netip.MustParsePrefix("198.19.5.0/24")
	addrs := []netip.Addr{netip.MustParseAddr("198.19.1.1")}
	udp := []UDPMatch{{Addr: netip.MustParseAddr("198.18.0.1"), PortLo: 51820, PortHi: 51820}}
	calls := map[string]func(p *Port) error{
		"AddPrefix":    func(p *Port) error { return p.AddPrefix(pfx) },
		"AddPrefixes":  func(p *Port) error { _, err := p.AddPrefixes([]netip.Prefix{pfx}); return err },
		"DeletePrefix": func(p *Port) error { return p.DeletePrefix(pfx) },
		"DeletePrefixes": func(p *Port) error {
			_, err := p.DeletePrefixes([]netip.Prefix{pfx})
			return err
		},
		"SetUDP":       func(p *Port) error { return p.SetUDP(udp) },
		"SetHostAddrs": func(p *Port) error { return p.SetHostAddrs(addrs) },
	}
	for round := range 20 {
		prog, err := newProgram(Filter{Prefixes: true}, ourMAC, 4, 0)
		if err != nil {
			t.Fatal(err)
		}
		p := &Port{prog: prog}
		done := make(chan struct{})
		for _, call := range calls {
			go func() {
				defer func() { done <- struct{}{} }()
				for !p.closed.Load() {
					call(p)
				}
			}()
		}
		time.Sleep(time.Duration(round%4) * time.Millisecond)
		p.Close()
		for range calls {
			<-done
		}
		for name, call := range calls {
			if err := call(p); !errors.Is(err, net.ErrClosed) {
				t.Fatalf("%s after Close = %v, want an error wrapping net.ErrClosed", name, err)
			}
		}
	}
}

// TestSetUDPManyAddrs: the UDP match holds MaxUDPAddrs addresses of each
// family (a WAN with keepalived virtual addresses beside its own), a set
// that large replaces another as large and disjoint from it (the stale
// ones go first), and with more the error names the first address left
// out. The old map held 64.
func TestSetUDPManyAddrs(t *testing.T) {
	testenv.Root(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	set := func(base string, n int) []UDPMatch {
		a := netip.MustParseAddr(base)
		out := make([]UDPMatch, n)
		for i := range out {
			out[i] = UDPMatch{Addr: a, PortLo: 51820, PortHi: 51821}
			a = a.Next()
		}
		return out
	}
	old := append(set("198.18.1.0", MaxUDPAddrs), set("2001:db8:1::", MaxUDPAddrs)...)
	prog, err := newProgram(Filter{UDP: old}, ourMAC, 4, 0)
	if err != nil {
		t.Fatalf("newProgram(%d UDP matches of each family) = %v", MaxUDPAddrs, err)
	}
	defer prog.Close()
	p := &Port{prog: prog}
	renumbered := append(set("198.18.2.0", MaxUDPAddrs), set("2001:db8:2::", MaxUDPAddrs)...)
	if err := p.SetUDP(renumbered); err != nil {
		t.Fatalf("SetUDP(%d new of each family) = %v, want nil", MaxUDPAddrs, err)
	}
	last4, last6 := renumbered[MaxUDPAddrs-1].Addr.String(), renumbered[2*MaxUDPAddrs-1].Addr.String()
	runFilter(t, prog, []filterCase{
		{"first new v4", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "198.18.2.0", 0, 40), udp(51821)), redirect},
		{"last new v4", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, last4, 0, 40), udp(51820)), redirect},
		{"last new v6", cat(eth(ourMAC, 0x86dd, false), ip6hdr(17, last6, 40), udp(51820)), redirect},
		{"old v4", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "198.18.1.5", 0, 40), udp(51820)), pass},
		{"old v6", cat(eth(ourMAC, 0x86dd, false), ip6hdr(17, "2001:db8:1::5", 40), udp(51820)), pass},
	})
	tooMany := set("198.18.3.0", MaxUDPAddrs+1)
	if err := p.SetUDP(tooMany); err == nil || !strings.Contains(err.Error(), tooMany[MaxUDPAddrs].Addr.String()) {
		t.Errorf("SetUDP(%d IPv4) = %v, want an error naming %v", MaxUDPAddrs+1, err, tooMany[MaxUDPAddrs].Addr)
	}
}

// mldMsg returns a Hop-by-Hop Options header of 8 bytes (hbhLen 0; more
// with hbhLen) with a Router Alert, then an ICMPv6 message of type typ
// (an MLD query is 130, RFC 3810 §5.1).
func mldMsg(typ, hbhLen byte) []byte {
	b := []byte{58, hbhLen, 5, 2, 0, 0, 1, 0}
	b = append(b, make([]byte, int(hbhLen)*8)...)
	return append(b, append([]byte{typ}, make([]byte, 27)...)...)
}

// TestFilterMLDQueries: with Filter.MLDQueries on a VLAN (owned mode, no
// kernel VLAN device), MLD queries of the VLAN go to the socket, for
// wgpio to answer; reports, queries behind a longer Hop-by-Hop header,
// other VLANs' queries and, on an untagged port, every query go to the
// kernel.
func TestFilterMLDQueries(t *testing.T) {
	testenv.Root(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	allNodes := net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}
	for _, vlan := range []uint16{0, 100} {
		t.Run(fmt.Sprintf("vlan %d", vlan), func(t *testing.T) {
			prog, err := newProgram(Filter{Neighbours: []netip.Addr{netip.MustParseAddr("2001:db8::1")}, Prefixes: true, MLDQueries: true, VLAN: vlan}, ourMAC, 4, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer prog.Close()
			l2 := func() []byte {
				if vlan == 0 {
					return eth(allNodes, 0x86dd, false)
				}
				return ethTag(allNodes, 0x8100, vlan, 0x86dd)
			}
			query := redirect
			if vlan == 0 {
				query = pass
			}
			runFilter(t, prog, []filterCase{
				{"query", cat(l2(), ip6hdr(0, "ff02::1", 36), mldMsg(130, 0)), query},
				{"report", cat(l2(), ip6hdr(0, "ff02::16", 36), mldMsg(143, 0)), pass},
				{"query long hop-by-hop", cat(l2(), ip6hdr(0, "ff02::1", 44), mldMsg(130, 1)), pass},
				{"query truncated", cat(l2(), ip6hdr(0, "ff02::1", 8), mldMsg(130, 0)[:8]), pass},
			})
		})
	}
}

// TestAddPrefixes: Port.AddPrefixes puts a family's prefixes into the LAN
// match in one batch (and one at a time where the kernel has no batch for
// the map, forced here), as AddPrefix would each: frames to them are
// redirected, others not. With more prefixes than the map has room for,
// it reports how many went in and names the first refused; prefixes of
// two families in one call are refused whole.
func TestAddPrefixes(t *testing.T) {
	testenv.Root(t)
	pfxs := mustPrefixes // short, as the cases below read
	for _, noBatch := range []bool{false, true} {
		t.Run(fmt.Sprintf("noBatch=%v", noBatch), func(t *testing.T) {
			p, prog := prefixPort(t)
			p.noBatch = noBatch
			if n, err := p.AddPrefixes(pfxs("198.19.7.0/24", "198.19.8.9/32", "10.1.0.0/16")); n != 3 || err != nil {
				t.Fatalf("AddPrefixes of 3 IPv4 prefixes = %d, %v; want 3, nil", n, err)
			}
			if n, err := p.AddPrefixes(pfxs("2001:db8:7::/48", "2001:db8:8::9/128")); n != 2 || err != nil {
				t.Fatalf("AddPrefixes of 2 IPv6 prefixes = %d, %v; want 2, nil", n, err)
			}
			if n, err := p.AddPrefixes(pfxs("198.19.9.0/24", "2001:db8:9::/48")); n != 0 || err == nil {
				t.Errorf("AddPrefixes of two families = %d, %v; want 0 and an error", n, err)
			}
			// Room for 4: the fourth goes in, the fifth is refused, the
			// sixth not tried.
			n, err := p.AddPrefixes(pfxs("198.19.10.0/24", "198.19.11.0/24", "198.19.12.0/24"))
			if n != 1 || err == nil || !strings.Contains(err.Error(), "198.19.11.0/24") {
				t.Errorf("AddPrefixes past the map's room = %d, %v; want 1 and an error naming 198.19.11.0/24", n, err)
			}
			runFilter(t, prog, []filterCase{
				{"in a /24", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "198.19.7.20", 0, 40), udp(9)), redirect},
				{"the /32", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "198.19.8.9", 0, 40), udp(9)), redirect},
				{"the fourth", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "198.19.10.1", 0, 40), udp(9)), redirect},
				{"refused", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "198.19.11.1", 0, 40), udp(9)), pass},
				{"not tried", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "198.19.12.1", 0, 40), udp(9)), pass},
				{"in the /48", cat(eth(ourMAC, 0x86dd, false), ip6hdr(17, "2001:db8:7::5", 40), udp(9)), redirect},
				{"outside", cat(eth(ourMAC, 0x86dd, false), ip6hdr(17, "2001:db8:6::5", 40), udp(9)), pass},
			})
		})
	}
}

// TestDeletePrefixes: Port.DeletePrefixes takes a family's prefixes out of
// the LAN match in one batch (and one at a time where the kernel has no
// batch for the map, forced here), as DeletePrefix would each: frames to
// them pass to the kernel again, to the others are still redirected, and
// a prefix deleted can be added back. A prefix not in the map stops it:
// it reports how many went out and names that one; those after it stay.
// Prefixes of two families in one call are refused whole.
func TestDeletePrefixes(t *testing.T) {
	testenv.Root(t)
	pfxs := mustPrefixes // short, as the cases below read
	for _, noBatch := range []bool{false, true} {
		t.Run(fmt.Sprintf("noBatch=%v", noBatch), func(t *testing.T) {
			p, prog := prefixPort(t)
			p.noDeleteBatch = noBatch
			if n, err := p.AddPrefixes(pfxs("198.19.7.0/24", "198.19.8.9/32", "10.1.0.0/16", "10.2.0.0/16")); n != 4 || err != nil {
				t.Fatalf("AddPrefixes of 4 IPv4 prefixes = %d, %v; want 4, nil", n, err)
			}
			if n, err := p.AddPrefixes(pfxs("2001:db8:7::/48", "2001:db8:8::9/128")); n != 2 || err != nil {
				t.Fatalf("AddPrefixes of 2 IPv6 prefixes = %d, %v; want 2, nil", n, err)
			}
			if n, err := p.DeletePrefixes(pfxs("198.19.7.0/24", "10.1.0.0/16")); n != 2 || err != nil {
				t.Fatalf("DeletePrefixes of 2 IPv4 prefixes = %d, %v; want 2, nil", n, err)
			}
			if !noBatch && p.noDeleteBatch {
				t.Log("this kernel has no batch delete for LPM tries: one at a time")
			}
			if n, err := p.DeletePrefixes(pfxs("2001:db8:7::/48")); n != 1 || err != nil {
				t.Fatalf("DeletePrefixes of an IPv6 prefix = %d, %v; want 1, nil", n, err)
			}
			if n, err := p.DeletePrefixes(pfxs("198.19.8.9/32", "2001:db8:8::9/128")); n != 0 || err == nil {
				t.Errorf("DeletePrefixes of two families = %d, %v; want 0 and an error", n, err)
			}
			// One out, the next not in the map (named), the last not
			// tried.
			n, err := p.DeletePrefixes(pfxs("10.2.0.0/16", "10.9.0.0/16", "198.19.8.9/32"))
			if n != 1 || !errors.Is(err, ebpf.ErrKeyNotExist) || !strings.Contains(err.Error(), "10.9.0.0/16") {
				t.Errorf("DeletePrefixes past a prefix not in the map = %d, %v; want 1 and an error naming 10.9.0.0/16 wrapping ErrKeyNotExist", n, err)
			}
			// Back in its slot: the map's room is whole again (4).
			if n, err := p.AddPrefixes(pfxs("198.19.7.0/24", "10.3.0.0/16", "10.4.0.0/16")); n != 3 || err != nil {
				t.Fatalf("AddPrefixes of 3 after the deletes = %d, %v; want 3, nil", n, err)
			}
			runFilter(t, prog, []filterCase{
				{"back", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "198.19.7.20", 0, 40), udp(9)), redirect},
				{"deleted", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "10.1.0.1", 0, 40), udp(9)), pass},
				{"deleted before the missing one", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "10.2.0.1", 0, 40), udp(9)), pass},
				{"not tried", cat(eth(ourMAC, 0x0800, false), ip4hdr(17, "198.19.8.9", 0, 40), udp(9)), redirect},
				{"in the other family's batch", cat(eth(ourMAC, 0x86dd, false), ip6hdr(17, "2001:db8:8::9", 40), udp(9)), redirect},
				{"deleted v6", cat(eth(ourMAC, 0x86dd, false), ip6hdr(17, "2001:db8:7::5", 40), udp(9)), pass},
			})
		})
	}
}

// mustPrefixes parses s, prefixes a test writes.
func mustPrefixes(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, x := range s {
		out = append(out, netip.MustParsePrefix(x))
	}
	return out
}

// prefixPort is a Port holding only a LAN program whose prefix match has
// room for 4 prefixes a family, for the map's methods; closed when the
// test ends. The caller is root.
func prefixPort(t *testing.T) (*Port, *program) {
	t.Helper()
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	prog, err := newProgram(Filter{Prefixes: true, PrefixCapacity: 4}, ourMAC, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := &Port{prog: prog}
	t.Cleanup(func() { p.Close() })
	return p, prog
}

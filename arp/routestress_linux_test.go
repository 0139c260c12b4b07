package arp

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestSharedRoutesFollowedAsListed: a random run of route changes of both
// families (add, replace, append, prepend, delete, by metric, unicast and
// not, on two links, aliases of one next hop by another proto), links
// going down and up and addresses of both families removed and put
// back, as an operator and a flaky network make them, leaves the
// follower's table answering as a fresh listing of the kernel's does.
func TestSharedRoutesFollowedAsListed(t *testing.T) {
	us, _, v := sharedPair(t)
	run := func(args ...string) {
		t.Helper()
		if out, err := us.Run("ip", args...); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	try := func(args ...string) { us.Run("ip", args...) } // the kernel may refuse (no such route, exists)
	run("link", "add", "d0", "type", "veth", "peer", "name", "d1")
	run("link", "set", "d1", "up")
	run("addr", "add", "198.18.5.1/24", "dev", "d0")
	run("addr", "add", "2001:2:5::1/64", "dev", "d0", "nodad")
	run("link", "set", "d0", "up")
	kr, err := NewKernelRoutes(KernelOptions{Namespace: us.NsHandle()})
	must(t, err)
	defer kr.Close()

	pfx4 := []string{"198.19.0.0/16", "198.19.1.0/24", "198.19.1.128/25", "0.0.0.0/0"}
	pfx6 := []string{"2001:2:9::/48", "2001:2:9:1::/64", "::/0"}
	via4 := [][2]string{{"198.18.0.2", v.A}, {"198.18.0.3", v.A}, {"198.18.5.2", "d0"}}
	via6 := [][2]string{{"fe80::2", v.A}, {"2001:2::3", v.A}, {"2001:2:5::2", "d0"}}
	metrics := []string{"0", "10", "20"}
	dsts := []netip.Addr{}
	for _, s := range []string{"198.19.1.1", "198.19.1.200", "198.19.7.7", "203.0.113.9", "2001:2:9:1::9", "2001:2:9:2::9", "2001:db8::9"} {
		dsts = append(dsts, netip.MustParseAddr(s))
	}
	rng := rand.New(rand.NewPCG(7, 7))
	var ops []string
	for i := range 400 {
		fam, pfx, via := "-4", pfx4, via4
		if rng.IntN(2) == 0 {
			fam, pfx, via = "-6", pfx6, via6
		}
		p, g, m := pfx[rng.IntN(len(pfx))], via[rng.IntN(len(via))], metrics[rng.IntN(len(metrics))]
		// Aliases of one next hop differ in proto (the kernel takes an
		// append of the same gateway by another daemon).
		proto := []string{"boot", "static", "dhcp"}[rng.IntN(3)]
		var args []string
		switch op := rng.IntN(20); {
		case op < 5:
			args = []string{fam, "route", "add", p, "via", g[0], "dev", g[1], "metric", m}
		case op < 8:
			args = []string{fam, "route", "replace", p, "via", g[0], "dev", g[1], "metric", m}
		case op < 9:
			args = []string{fam, "route", "append", p, "via", g[0], "dev", g[1], "metric", m, "proto", proto}
		case op < 10:
			args = []string{fam, "route", "prepend", p, "via", g[0], "dev", g[1], "metric", m, "proto", proto}
		case op < 12:
			args = []string{fam, "route", "del", p, "metric", m}
		case op < 14:
			args = []string{fam, "route", "del", p, "metric", m, "proto", proto}
		case op < 15:
			args = []string{fam, "route", "replace", []string{"blackhole", "unreachable", "prohibit"}[rng.IntN(3)], p, "metric", m}
		case op < 16:
			args = []string{fam, "route", "add", p, "dev", g[1], "metric", m}
		case op < 17:
			l := []string{v.A, "d0"}[rng.IntN(2)]
			args = []string{"link", "set", l, "down"}
			try(args...)
			ops = append(ops, strings.Join(args, " "))
			args = []string{"link", "set", l, "up"}
		case op < 18:
			a := []string{"198.18.0.1/24 dev " + v.A, "198.18.5.1/24 dev d0", "2001:2::1/64 dev " + v.A + " nodad", "2001:2:5::1/64 dev d0 nodad"}[rng.IntN(4)]
			args = append([]string{"addr", "del"}, strings.Fields(strings.TrimSuffix(a, " nodad"))...)
			try(args...)
			ops = append(ops, strings.Join(args, " "))
			args = append([]string{"addr", "add"}, strings.Fields(a)...)
		default:
			args = []string{fam, "route", "flush", p}
		}
		try(args...)
		ops = append(ops, strings.Join(args, " "))
		if i%50 == 49 || i == 399 {
			compareWithListing(t, kr, dsts, ops)
		}
	}
	t.Logf("listings %d, snapshots %d", kr.Listings.Load(), kr.Updates.Load())
}

// compareWithListing waits up to a second for kr to answer for every dst as
// a fresh listing does.
func compareWithListing(t *testing.T, kr *KernelRoutes, dsts []netip.Addr, ops []string) {
	t.Helper()
	fresh, err := NewKernelRoutes(KernelOptions{Namespace: kr.opts.Namespace})
	must(t, err)
	defer fresh.Close()
	var diff []string
	waitFor(time.Second, func() bool {
		diff = diff[:0]
		for _, d := range dsts {
			a, ai, aok := kr.NextHop(d)
			b, bi, bok := fresh.NextHop(d)
			if a != b || ai != bi || aok != bok {
				diff = append(diff, fmt.Sprintf("%v: followed %v dev %d %v, listed %v dev %d %v", d, a, ai, aok, b, bi, bok))
			}
		}
		return len(diff) == 0
	})
	if len(diff) > 0 {
		last := ops[max(0, len(ops)-8):]
		t.Fatalf("after %d changes (the last: %s):\n%s", len(ops), strings.Join(last, "; "), strings.Join(diff, "\n"))
	}
}

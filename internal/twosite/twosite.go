//go:build linux

package twosite

import (
	"fmt"
	"net/netip"

	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/internal/testing/wgpeer"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/noise"
)

// Addresses of the site topology.
var (
	HostA4   = netip.MustParseAddr("198.19.1.10")
	HostB4   = netip.MustParseAddr("198.19.2.10")
	HostA6   = netip.MustParseAddr("2001:db8:1::10")
	HostB6   = netip.MustParseAddr("2001:db8:2::10")
	TunnelA  = netip.MustParseAddr("198.19.100.1")
	TunnelB  = netip.MustParseAddr("198.19.100.2")
	LANA4    = netip.MustParseAddr("198.19.1.1")
	LANB4    = netip.MustParseAddr("198.19.2.1")
	SitesNet = netip.MustParsePrefix("198.19.0.0/16")
)

// Config chooses a variant of the topology.
type Config struct {
	// Routed puts a router namespace between the gateways, so that the
	// endpoints are not on-link.
	Routed bool
	// Outer6 uses IPv6 outer endpoints.
	Outer6 bool
	// Queues on gwA's veths (default 1).
	Queues int
	// SourcePorts at gwA (default 1).
	SourcePorts uint16
	// NoFastPath builds the namespaces and the stock peer but does not
	// start gwA; the caller starts its own gateway with FastConfig.
	NoFastPath bool
	// PeerFastPath runs a second wgpio fast-path gateway in gwB instead
	// of stock wireguard-go (wgpio ↔ wgpio), with the same Queues and
	// SourcePorts.
	PeerFastPath bool
	// Owned runs gwA in the owned address mode: its kernel has no address
	// on the two interfaces; wgpio answers ARP (and, with Outer6, NDP for
	// its IPv6 WAN address) itself.
	Owned bool
	// AllowedA overrides the allowed IPs gwA routes to gwB (default the
	// site B networks and gwB's tunnel address).
	AllowedA []netip.Prefix
	// CPUs pins the wgpio gateways' workers (fastgw.Config.CPUs).
	CPUs []int
	// PeerCPUs pins gwB's workers with PeerFastPath instead (default
	// CPUs): each gateway's worker 0 on a CPU of its own.
	PeerCPUs []int
	// LANVLAN puts gwA's LAN on this 802.1Q VLAN (fastgw.Config.LANVLAN)
	// and makes hostA a host on an access port of it (topo.VLANAccess):
	// its frames leave tagged, and it drops what comes untagged. Needs
	// Owned (no kernel VLAN device without the 8021q module).
	LANVLAN uint16
	// LANVLANInBand writes hostA's tags into the frames; without it they
	// reach gwA as the skb's VLAN metadata, as RX VLAN offload leaves them.
	LANVLANInBand bool
	// WANVLAN puts gwA's WAN on this 802.1Q VLAN (fastgw.Config.WANVLAN)
	// and the other end of gwA's WAN link (gwB's, or with Routed the
	// router's) on an access port of it, tags in the frames. Needs Owned.
	WANVLAN uint16
}

// Site is a built topology.
type Site struct {
	HostA, GwA, GwB, HostB, Router *topo.NS
	// LANA and WANA are gwA's interface names (inside GwA).
	LANA, WANA string
	// Gateway is gwA's wgpio gateway (nil with NoFastPath).
	Gateway *fastgw.Gateway
	// FastConfig is the configuration gwA runs (or would run).
	FastConfig fastgw.Config
	// Stock is gwB's stock wireguard-go device (nil with PeerFastPath).
	Stock *wgpeer.Device
	// PeerGateway is gwB's wgpio gateway with PeerFastPath.
	PeerGateway *fastgw.Gateway
	// LANB and WANB are gwB's interface names (inside GwB).
	LANB, WANB string
	// RouterA and RouterB are the router's interfaces toward gwA and gwB
	// (inside Router; Routed only).
	RouterA, RouterB string
	// GwName and StockName are the UAPI names (wg show NAME).
	GwName, StockName string
}

// Close stops the gateways. The namespaces belong to the topology.
func (s *Site) Close() {
	if s.Gateway != nil {
		s.Gateway.Close()
	}
	if s.Stock != nil {
		s.Stock.Close()
	}
	if s.PeerGateway != nil {
		s.PeerGateway.Close()
	}
}

// Build makes the namespaces, veths, addresses and routes in tp, starts
// the stock wireguard-go peer in gwB and, unless NoFastPath, the wgpio
// fast-path gateway in gwA. On error the caller closes tp (and s, if not
// nil).
func Build(tp *topo.Topology, sc Config) (s *Site, err error) {
	if sc.Queues == 0 {
		sc.Queues = 1
	}
	site := &Site{}
	s = site
	defer func() {
		if err != nil {
			site.Close() // s is nil here
		}
	}()
	var errs []error
	must := func(e error) {
		if e != nil {
			errs = append(errs, e)
		}
	}
	mkns := func(role string) *topo.NS {
		ns, e := tp.NewNS(role)
		must(e)
		return ns
	}
	s.HostA, s.GwA, s.GwB, s.HostB = mkns("ha"), mkns("ga"), mkns("gb"), mkns("hb")
	if len(errs) > 0 {
		return nil, errs[0]
	}
	veth := func(a, b *topo.NS, q int) *topo.Veth {
		v, e := tp.NewVeth(a, b, topo.VethConfig{Queues: q})
		if e != nil {
			must(e)
			return &topo.Veth{}
		}
		return v
	}
	lanA := veth(s.HostA, s.GwA, sc.Queues)
	if sc.LANVLAN != 0 && len(errs) == 0 {
		must(tp.VLANAccess(s.HostA, lanA.A, sc.LANVLAN, sc.LANVLANInBand))
	}
	qb := 1
	if sc.PeerFastPath {
		qb = sc.Queues
	}
	lanB := veth(s.GwB, s.HostB, qb)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	// gwAAddr gives gwA's kernel an address, except in owned mode.
	gwAAddr := func(dev, cidr string) {
		if !sc.Owned {
			must(s.GwA.AddAddr(dev, cidr))
		}
	}
	must(s.HostA.AddAddr(lanA.A, "198.19.1.10/24"))
	gwAAddr(lanA.B, "198.19.1.1/24")
	must(s.HostA.AddAddr(lanA.A, "2001:db8:1::10/64"))
	gwAAddr(lanA.B, "2001:db8:1::1/64")
	must(s.HostA.AddRoute("198.19.0.0/16", "198.19.1.1", ""))
	must(s.HostA.AddRoute("2001:db8::/32", "2001:db8:1::1", ""))
	must(s.GwB.AddAddr(lanB.A, "198.19.2.1/24"))
	must(s.HostB.AddAddr(lanB.B, "198.19.2.10/24"))
	must(s.GwB.AddAddr(lanB.A, "2001:db8:2::1/64"))
	must(s.HostB.AddAddr(lanB.B, "2001:db8:2::10/64"))
	must(s.HostB.AddRoute("default", "198.19.2.1", ""))
	must(s.HostB.AddRoute("default", "2001:db8:2::1", ""))
	must(s.GwB.Forwarding())

	var wanA *topo.Veth
	var endA, endB netip.Addr
	var wanBName string
	if !sc.Routed {
		wanA = veth(s.GwA, s.GwB, sc.Queues)
		wanBName = wanA.B
		if sc.WANVLAN != 0 && len(errs) == 0 {
			must(tp.VLANAccess(s.GwB, wanA.B, sc.WANVLAN, true))
		}
		gwAAddr(wanA.A, "198.18.1.1/24")
		must(s.GwB.AddAddr(wanA.B, "198.18.1.2/24"))
		gwAAddr(wanA.A, "2001:db8:f::1/64")
		must(s.GwB.AddAddr(wanA.B, "2001:db8:f::2/64"))
		endA, endB = netip.MustParseAddr("198.18.1.1"), netip.MustParseAddr("198.18.1.2")
		if sc.Outer6 {
			endA, endB = netip.MustParseAddr("2001:db8:f::1"), netip.MustParseAddr("2001:db8:f::2")
		}
	} else {
		s.Router = mkns("rt")
		wanA = veth(s.GwA, s.Router, sc.Queues)
		wanB := veth(s.Router, s.GwB, qb)
		wanBName = wanB.B
		s.RouterA, s.RouterB = wanA.B, wanB.A
		if sc.WANVLAN != 0 && len(errs) == 0 {
			must(tp.VLANAccess(s.Router, wanA.B, sc.WANVLAN, true))
		}
		gwAAddr(wanA.A, "198.18.1.1/24")
		must(s.Router.AddAddr(wanA.B, "198.18.1.254/24"))
		must(s.Router.AddAddr(wanB.A, "198.18.2.254/24"))
		must(s.GwB.AddAddr(wanB.B, "198.18.2.2/24"))
		gwAAddr(wanA.A, "2001:db8:f1::1/64")
		must(s.Router.AddAddr(wanA.B, "2001:db8:f1::fe/64"))
		must(s.Router.AddAddr(wanB.A, "2001:db8:f2::fe/64"))
		must(s.GwB.AddAddr(wanB.B, "2001:db8:f2::2/64"))
		must(s.Router.Forwarding())
		if !sc.Owned {
			must(s.GwA.AddRoute("198.18.2.0/24", "198.18.1.254", ""))
		}
		must(s.GwB.AddRoute("198.18.1.0/24", "198.18.2.254", ""))
		if !sc.Owned {
			must(s.GwA.AddRoute("2001:db8:f2::/64", "2001:db8:f1::fe", ""))
		}
		must(s.GwB.AddRoute("2001:db8:f1::/64", "2001:db8:f2::fe", ""))
		endA, endB = netip.MustParseAddr("198.18.1.1"), netip.MustParseAddr("198.18.2.2")
		if sc.Outer6 {
			endA, endB = netip.MustParseAddr("2001:db8:f1::1"), netip.MustParseAddr("2001:db8:f2::2")
		}
	}
	if len(errs) > 0 {
		return nil, errs[0]
	}
	s.LANA, s.WANA = lanA.B, wanA.A
	s.LANB, s.WANB = lanB.A, wanBName

	privA, err := noise.NewPrivateKey()
	if err != nil {
		return nil, err
	}
	privB, err := noise.NewPrivateKey()
	if err != nil {
		return nil, err
	}
	s.GwName, s.StockName = topo.UniqueName("wgpa"), topo.UniqueName("wgsb")
	allowedB := []netip.Prefix{netip.MustParsePrefix("198.19.1.0/24"), netip.MustParsePrefix("198.19.100.1/32"), netip.MustParsePrefix("2001:db8:1::/64")}
	if sc.PeerFastPath {
		cpusB := sc.CPUs
		if sc.PeerCPUs != nil {
			cpusB = sc.PeerCPUs
		}
		cfgB := fastgw.Config{
			Name: s.StockName, PrivateKey: privB, ListenPort: 51820,
			WAN: wanBName, LAN: lanB.A, Queues: qb, SourcePorts: sc.SourcePorts, CPUs: cpusB,
			Addresses: []netip.Prefix{netip.MustParsePrefix("198.19.100.2/24")},
			Peers: []gateway.PeerConfig{{
				PublicKey: privA.PublicKey(), Endpoint: netip.AddrPortFrom(endA, 51820), AllowedIPs: allowedB,
			}},
		}
		if err := s.GwB.Do(func() (err error) {
			s.PeerGateway, err = fastgw.Start(cfgB)
			return err
		}); err != nil {
			return nil, fmt.Errorf("start the peer wgpio gateway in %s: %w", s.GwB.Name, err)
		}
	} else {
		s.Stock, err = wgpeer.Start(s.GwB, wgpeer.Config{
			Name: s.StockName, PrivateKey: privB, ListenPort: 51820,
			Address: netip.MustParsePrefix("198.19.100.2/24"),
			Routes:  []netip.Prefix{netip.MustParsePrefix("198.19.1.0/24"), netip.MustParsePrefix("2001:db8:1::/64")},
			Peers: []wgpeer.Peer{{
				PublicKey:  privA.PublicKey(),
				Endpoint:   netip.AddrPortFrom(endA, 51820),
				AllowedIPs: allowedB,
			}},
		})
		if err != nil {
			return nil, err
		}
	}
	allowedA := sc.AllowedA
	if allowedA == nil {
		allowedA = []netip.Prefix{netip.MustParsePrefix("198.19.2.0/24"), netip.MustParsePrefix("198.19.100.2/32"), netip.MustParsePrefix("2001:db8:2::/64")}
	}
	s.FastConfig = fastgw.Config{
		Name: s.GwName, PrivateKey: privA, ListenPort: 51820,
		WAN: wanA.A, LAN: lanA.B, Queues: sc.Queues, SourcePorts: sc.SourcePorts, CPUs: sc.CPUs,
		Addresses: []netip.Prefix{netip.MustParsePrefix("198.19.100.1/24")},
		Peers: []gateway.PeerConfig{{
			PublicKey:  privB.PublicKey(),
			Endpoint:   netip.AddrPortFrom(endB, 51820),
			AllowedIPs: allowedA,
		}},
	}
	s.FastConfig.LANVLAN, s.FastConfig.WANVLAN = sc.LANVLAN, sc.WANVLAN
	if sc.Owned {
		s.FastConfig.Owned = true
		s.FastConfig.WANAddress = netip.MustParsePrefix("198.18.1.1/24")
		s.FastConfig.LANAddress = netip.MustParsePrefix("198.19.1.1/24")
		if sc.Routed {
			s.FastConfig.Gateway = netip.MustParseAddr("198.18.1.254")
		}
		if sc.Outer6 { // the WAN address the peer's endpoint names
			s.FastConfig.WANAddress = netip.PrefixFrom(endA, 64)
			if sc.Routed {
				s.FastConfig.Gateway = netip.MustParseAddr("2001:db8:f1::fe")
			}
		}
	}
	if sc.NoFastPath {
		return s, nil
	}
	if err := s.GwA.Do(func() (err error) {
		s.Gateway, err = fastgw.Start(s.FastConfig)
		return err
	}); err != nil {
		return nil, fmt.Errorf("start the wgpio gateway in %s: %w", s.GwA.Name, err)
	}
	return s, nil
}

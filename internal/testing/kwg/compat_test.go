//go:build linux

package kwg_test

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/device"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/bind"
	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/internal/testenv"
	"github.com/wgpio/wgpio/internal/testing/kwg"
	"github.com/wgpio/wgpio/internal/topo"
	"github.com/wgpio/wgpio/tundev"
)

// compat is stock wireguard-go (golang.zx2c4.com/wireguard/device,
// unmodified) on wgpio's bind over an AF_XDP port on the guest's tap (the
// encrypted side) and wgpio's tundev.PortDevice over an AF_XDP port on the
// LAN veth (the plaintext side), next hops from the kernel (shared address
// mode). Nothing of it uses a kernel socket or TUN.
type compat struct {
	dev        *device.Device
	wan, lan   *afxdp.Port
	b          *bind.Bind
	tdev       *tundev.PortDevice
	routes     *arp.KernelRoutes
	neighWAN   *arp.KernelNeighbours
	neighLAN   *arp.KernelNeighbours
	tablesDone chan struct{}
	nl         *netlink.Handle
}

// startCompat builds the compat peer inside ns: every socket and netlink
// handle is made there.
func startCompat(ns *topo.NS, wanName, lanName string, priv, guestPub kwg.Key, logs *testenv.LogBuffer) (_ *compat, err error) {
	c := &compat{tablesDone: make(chan struct{})}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	err = ns.Do(func() error {
		var err error
		if c.nl, err = netlink.NewHandle(); err != nil {
			return err
		}
		wl, err := c.nl.LinkByName(wanName)
		if err != nil {
			return err
		}
		ll, err := c.nl.LinkByName(lanName)
		if err != nil {
			return err
		}
		if c.routes, err = arp.NewKernelRoutes(arp.KernelOptions{}); err != nil {
			return err
		}
		wanTable := arp.NewTable(arp.Config{Prober: &arp.KernelProber{Handle: c.nl, LinkIndex: wl.Attrs().Index}})
		lanTable := arp.NewTable(arp.Config{Prober: &arp.KernelProber{Handle: c.nl, LinkIndex: ll.Attrs().Index}})
		go wanTable.Run(c.tablesDone, 0)
		go lanTable.Run(c.tablesDone, 0)
		if c.neighWAN, err = arp.NewKernelNeighbours(wanTable, arp.KernelOptions{LinkIndex: wl.Attrs().Index}); err != nil {
			return err
		}
		if c.neighLAN, err = arp.NewKernelNeighbours(lanTable, arp.KernelOptions{LinkIndex: ll.Attrs().Index}); err != nil {
			return err
		}
		// A tap has no native AF_XDP: generic XDP on both ports.
		c.wan, err = afxdp.Open(wanName, afxdp.Config{Queues: 1, Attach: afxdp.AttachGeneric,
			Filter: bind.XDPFilter([]netip.Addr{tapAddr.Addr()}, ourPort, false)})
		if err != nil {
			return fmt.Errorf("open WAN port: %w", err)
		}
		c.lan, err = afxdp.Open(lanName, afxdp.Config{Queues: 1, Attach: afxdp.AttachGeneric,
			Filter: afxdp.Filter{Prefixes: true, HostAddrs: []netip.Addr{lanGateway.Addr()}}})
		if err != nil {
			return fmt.Errorf("open LAN port: %w", err)
		}
		if err := c.lan.AddPrefix(guestAllow); err != nil {
			return err
		}
		if c.b, err = bind.New(bind.Config{Port: c.wan, Addr4: tapAddr.Addr(), ListenPort: ourPort,
			Routes: c.routes, Neighbours: wanTable, ChecksumIPv4: true}); err != nil {
			return err
		}
		if c.tdev, err = tundev.NewPortDevice(tundev.PortConfig{Port: c.lan, MTU: 1420,
			Routes: c.routes, Neighbours: lanTable}); err != nil {
			return err
		}
		logger := &device.Logger{
			Verbosef: func(f string, a ...any) { fmt.Fprintf(logs, "wireguard-go: "+f+"\n", a...) },
			Errorf:   func(f string, a ...any) { fmt.Fprintf(logs, "wireguard-go ERROR: "+f+"\n", a...) },
		}
		c.dev = device.NewDevice(c.tdev, c.b, logger)
		cfg := fmt.Sprintf("private_key=%s\nlisten_port=%d\nreplace_peers=true\npublic_key=%s\nendpoint=%s\nreplace_allowed_ips=true\nallowed_ip=%s\n",
			hex.EncodeToString(priv[:]), ourPort, hex.EncodeToString(guestPub[:]), guestEP, guestAllow)
		if err := c.dev.IpcSet(cfg); err != nil {
			return fmt.Errorf("configure wireguard-go: %w", err)
		}
		return c.dev.Up()
	})
	return c, err
}

// close stops wireguard-go (which closes the bind and the device), then
// the ports and the kernel mirrors.
func (c *compat) close() error {
	var errs []error
	if c.dev != nil {
		c.dev.Close()
	} else {
		if c.b != nil {
			errs = append(errs, c.b.Close())
		}
		if c.tdev != nil {
			errs = append(errs, c.tdev.Close())
		}
	}
	for _, p := range []*afxdp.Port{c.lan, c.wan} {
		if p != nil {
			errs = append(errs, p.Close())
		}
	}
	close(c.tablesDone)
	for _, k := range []*arp.KernelNeighbours{c.neighWAN, c.neighLAN} {
		if k != nil {
			errs = append(errs, k.Close())
		}
	}
	if c.routes != nil {
		errs = append(errs, c.routes.Close())
	}
	if c.nl != nil {
		c.nl.Close()
	}
	return errors.Join(errs...)
}

func (c *compat) stats() string {
	if c == nil || c.b == nil || c.tdev == nil {
		return "(not running)"
	}
	return fmt.Sprintf("bind %+v; tundev %+v", c.b.Stats(), c.tdev.Stats())
}

// TestKernelCompat checks stock wireguard-go on wgpio's bind and tundev
// (compat mode) against the kernel's WireGuard, in the fast-path test's
// topology: the bind's port is the guest's tap, the PortDevice's port the
// veth to the LAN host that runs the probes.
func TestKernelCompat(t *testing.T) {
	env := requireGuest(t)
	tp := testenv.Topology(t, "kwc")
	gwNS := testenv.NS(t, tp, "g")
	lanNS := testenv.NS(t, tp, "l")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	lan, err := tp.NewVeth(gwNS, lanNS, topo.VethConfig{})
	must(err)
	must(gwNS.AddAddr(lan.A, lanGateway.String()))
	must(lanNS.AddAddr(lan.B, lanHost.String()))
	must(lanNS.AddRoute("default", lanGateway.Addr().String(), ""))

	priv, guestPriv := kwg.NewPrivateKey(), kwg.NewPrivateKey()
	g, err := kwg.Boot(env, kwg.GuestConfig{
		NS: gwNS, Tap: topo.UniqueName("kwt"), TapAddr: tapAddr,
		GuestAddr: guestAddr, GuestTunnel: guestTunnel, PrivateKey: guestPriv,
		PeerPublicKey: kwg.PublicKey(priv), PeerEndpoint: ourEndpoint,
		PeerAllowedIPs: []netip.Prefix{lanNet},
	})
	must(err)
	t.Cleanup(g.Close)
	t.Logf("guest booted in %v (%s)", g.Boot.Round(time.Millisecond), env.Accel)

	var logs testenv.LogBuffer
	var mu sync.Mutex
	var cur *compat
	start := func() error {
		mu.Lock()
		defer mu.Unlock()
		if cur != nil {
			fmt.Fprintf(&logs, "compat stats before the restart: %s\n", cur.stats())
			err := cur.close()
			cur = nil
			if err != nil {
				return err
			}
		}
		c, err := startCompat(gwNS, g.Tap(), lan.A, priv, kwg.PublicKey(guestPriv), &logs)
		if err != nil {
			return err
		}
		cur = c
		return nil
	}
	must(start())
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if cur != nil {
			cur.close()
		}
	})
	// No warm-up ping from the LAN host (unlike TestKernelFastPath):
	// PortDevice waits up to ResolveWait for the LAN host's MAC.
	in := newInterop(t, g, peer{
		probe:        lanNS,
		guestTargets: []netip.Addr{lanHost.Addr()},
		restart:      start,
		log: func() string {
			mu.Lock()
			defer mu.Unlock()
			return logs.String() + "\ncompat stats: " + cur.stats()
		},
		final: func(t *testing.T) {
			mu.Lock()
			defer mu.Unlock()
			t.Logf("compat stats: %s", cur.stats())
			// wireguard-go's own view of the guest, over its UAPI.
			get, err := cur.dev.IpcGet()
			if err != nil {
				t.Errorf("wireguard-go IpcGet: %v", err)
				return
			}
			kv := map[string]string{}
			for _, l := range strings.Split(get, "\n") {
				if k, v, ok := strings.Cut(l, "="); ok {
					kv[k] = v
				}
			}
			positive := func(k string) bool { n, err := strconv.ParseUint(kv[k], 10, 64); return err == nil && n > 0 }
			if kv["endpoint"] != guestEP.String() || !positive("last_handshake_time_sec") || !positive("rx_bytes") || !positive("tx_bytes") {
				t.Errorf("wireguard-go's view of the guest: %v, want endpoint %v, a handshake and transfer both ways", kv, guestEP)
			}
		},
	}, kwg.PublicKey(priv))
	in.run()
}

//go:build linux

package fastgw

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/wgpio/wgpio/internal/nldump"
	"github.com/wgpio/wgpio/tundev"
)

// addExceptionAddrs puts the gateway's tunnel addresses (Config.Addresses)
// on the exception TUN l, replacing any that are there.
func (g *Gateway) addExceptionAddrs(l netlink.Link) error {
	for _, p := range g.cfg.Addresses {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
		if p.Addr().Is6() {
			a.Flags |= 0x02 // IFA_F_NODAD
		}
		if err := g.nlHandle.AddrReplace(l, a); err != nil {
			return fmt.Errorf("fastgw: add %v to %s: %w", p, g.cfg.Name, err)
		}
	}
	return nil
}

// watchException restores, each time the exception TUN comes up after it
// was down (ip link set wg0 down, then up), what the kernel removed with
// it: the routes of the allowed IPs into it, and its IPv6 tunnel addresses
// (an IPv6 address leaves a link that goes down, unless
// net.ipv6.conf.*.keep_addr_on_down is set). On Linux wg-quick installed
// those and a down and up of wg0 loses them until wg-quick runs again; the
// gateway installed them itself and keeps them. While the interface is
// down the host's own traffic to the peers' networks has no route into the
// tunnel (as with wg0 down), and what the workers hand the host is counted
// as ExceptionDrops. A down and up while the link subscription was gone
// (it overflowed: ENOBUFS, and followLinks subscribes again) shows no
// transition: after each renewed subscription, with the link up, the
// watcher looks for what is missing and restores it (restoreMissing).
// It also tells of a change of the interface's MTU (ip link set wg0 mtu
// N): see exceptionMTUChanged. Runs until g.tableDone is closed.
func (g *Gateway) watchException() error {
	l := g.dp.excLink
	index, up := l.Attrs().Index, l.Attrs().Flags&net.FlagUp != 0
	mtu := l.Attrs().MTU
	// The first read follows Start's own installation: nothing to look
	// for then (listing the routes costs a dump of the whole table).
	first := true
	return g.followLinks(g.nsHandle, g.tableDone, "exception TUN", []int{index}, func(a netlink.LinkAttrs, reread bool) {
		if a.Index != index {
			return
		}
		if reread && first {
			first, reread = false, false
		}
		if a.MTU != mtu {
			g.exceptionMTUChanged(a.Name, a.MTU)
			mtu = a.MTU
		}
		now := a.Flags&net.FlagUp != 0
		switch {
		case now && !up:
			err := g.addExceptionAddrs(l)
			n := g.dp.restoreRoutes()
			if err != nil {
				g.log.Warn("exception TUN up again; its tunnel addresses could not be restored", "interface", a.Name, "err", err, "routes_restored", n)
			} else {
				g.log.Info("exception TUN up again: its tunnel addresses and routes restored", "interface", a.Name, "routes", n)
			}
		case now && reread:
			g.restoreMissing(l, a.Name)
		}
		up = now
	})
}

// exceptionMTUChanged logs that the exception TUN's MTU is now mtu
// (bytes): a warning when it differs from the tunnel MTU (Config.MTU),
// an info line when it is back to it. The new MTU bounds the host's own
// packets into the tunnel only (the kernel's, as for any interface): the
// workers keep enforcing Config.MTU on the transit traffic between the
// LAN and the peers (fragmentation needed / packet too big, fragments,
// MSS clamping), which no netlink update changes, where Linux's wg0
// applies a new MTU to what it forwards at once. An operator lowering
// wg0's MTU, as on Linux, is so told that only a restart with MTU in the
// file does that here.
func (g *Gateway) exceptionMTUChanged(name string, mtu int) {
	if mtu == g.cfg.MTU {
		g.log.Info("exception TUN MTU is the tunnel MTU again", "interface", name, "mtu", mtu)
		return
	}
	g.log.Warn("exception TUN MTU changed: it bounds only the host's own packets into the tunnel; the traffic between the LAN and the peers keeps the tunnel MTU the gateway started with (Linux's wg0 would apply the new MTU to it at once): set MTU in [Interface] and restart to change that",
		"interface", name, "mtu", mtu, "tunnel_mtu", g.cfg.MTU)
}

// restoreMissing puts back on the exception TUN l (up) the tunnel
// addresses and the routes of the allowed IPs it lacks, as they are after
// a down and up that no link update told of; it logs what it restored,
// nothing when nothing lacked.
func (g *Gateway) restoreMissing(l netlink.Link, name string) {
	addrs, err := g.exceptionAddrsMissing(l)
	if err == nil && addrs > 0 {
		err = g.addExceptionAddrs(l)
	}
	routes, rerr := g.dp.restoreMissingRoutes()
	switch {
	case err != nil || rerr != nil:
		g.log.Warn("exception TUN: restore what it lacks after its link subscription was renewed", "interface", name, "addr_err", err, "route_err", rerr, "routes_restored", routes)
	case addrs > 0 || routes > 0:
		g.log.Info("exception TUN went down and up while its link was not followed: its tunnel addresses and routes restored", "interface", name, "addresses", addrs, "routes", routes)
	}
}

// exceptionAddrsMissing counts the tunnel addresses (Config.Addresses) the
// exception TUN l does not have.
func (g *Gateway) exceptionAddrsMissing(l netlink.Link) (int, error) {
	list, err := nldump.Retry(func() ([]netlink.Addr, error) { return g.nlHandle.AddrList(l, netlink.FAMILY_ALL) })
	if err != nil {
		return 0, fmt.Errorf("list the addresses of %s: %w", g.cfg.Name, err)
	}
	have := make(map[netip.Prefix]bool, len(list))
	for _, a := range list {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			ones, _ := a.Mask.Size()
			have[netip.PrefixFrom(ip.Unmap(), ones)] = true
		}
	}
	missing := 0
	for _, p := range g.cfg.Addresses {
		if !have[p] {
			missing++
		}
	}
	return missing, nil
}

// readException carries the host kernel's packets from the exception TUN
// into the tunnel, each flow through one worker (tunnelQueue).
func (g *Gateway) readException() {
	defer g.excWG.Done()
	bufs := make([][]byte, g.exc.BatchSize())
	for i := range bufs {
		bufs[i] = make([]byte, 65535)
	}
	sizes := make([]int, len(bufs))
	for {
		n, err := g.exc.Read(bufs, sizes, 0)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				g.log.Error("exception TUN read failed: the host's own traffic into the tunnel stops until the gateway restarts", "interface", g.cfg.Name, "err", err)
			}
			return
		}
		for i := 0; i < n; i++ {
			pkt := bufs[i][:sizes[i]]
			g.engine.SendTunnel(tunnelQueue(pkt), pkt)
		}
	}
}

// ExceptionDrops is the number of packets for the host (to the gateway's
// tunnel addresses, or from the tunnel to its LAN or WAN addresses, or
// for its kernel to forward: a route off the LAN) that the exception TUN
// did not take: the sum of ExceptionTUN's write drops (full, down,
// malformed, write_error; its other reasons are of the host's packets
// into the tunnel), chiefly down, its interface was down or gone
// (the kernel refuses a TUN write then, EIO or EBADFD), and full, the
// kernel's queue had no room (EAGAIN: the worker drops the packet rather
// than wait, as the kernel's own full queues drop). The workers counted
// each packet for the host as handed on (fastpath.QueueStats.Exception,
// ToHost); these never reached the host. Zero without an exception TUN
// (no Config.Addresses). Safe for concurrent use.
func (g *Gateway) ExceptionDrops() uint64 {
	s, _ := g.ExceptionTUN()
	return writeDrops(&s.Drops)
}

// writeDrops is the sum of the write reasons of d.
func writeDrops(d *tundev.TUNDropCounts) uint64 {
	return d[tundev.TUNDropFull] + d[tundev.TUNDropDown] + d[tundev.TUNDropMalformed] + d[tundev.TUNDropWriteError]
}

// ExceptionTUN returns the exception TUN's counters (packets read from
// and written to the host's kernel, drops by reason), and false without
// an exception TUN. Safe for concurrent use.
func (g *Gateway) ExceptionTUN() (tundev.TUNStats, bool) {
	if g.exc == nil {
		return tundev.TUNStats{}, false
	}
	return g.exc.Stats(), true
}

// exceptionFailed logs a packet the exception TUN refused (and counted)
// at warning level, at most once a minute.
func (g *Gateway) exceptionFailed() {
	now := time.Now().UnixNano()
	if last := g.excWarned.Load(); now-last >= int64(time.Minute) && g.excWarned.CompareAndSwap(last, now) {
		d := g.exc.Counters().Drops // no netlink request on the worker
		g.log.Warn("exception TUN refused a packet for the host (down: is the interface up? full: the host's kernel does not keep up); such packets are dropped and counted as exception_tun_drops",
			"interface", g.cfg.Name, "dropped", writeDrops(&d), "by_reason", strings.Join(d.List(), " "))
	}
}

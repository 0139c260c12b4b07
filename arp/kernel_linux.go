package arp

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/internal/threadns"
)

// KernelOptions say which kernel tables the shared-mode readers follow.
type KernelOptions struct {
	// Namespace is the network namespace to read (netns.None() or 0:
	// the calling thread's, taken once by the constructor and kept, so
	// that a subscription renewed later from another thread stays in
	// it). The handle must stay open while the reader runs.
	Namespace netns.NsHandle
	// LinkIndex limits routes and neighbours to one interface (0: all).
	LinkIndex int
	// ErrorCallback, if set, receives errors of the subscription (for
	// instance a netlink socket overrun); the reader then lists again.
	ErrorCallback func(error)
}

func (o *KernelOptions) ns() netns.NsHandle {
	if o.Namespace <= 0 {
		return netns.None()
	}
	return o.Namespace
}

// pinNamespace replaces an unset Namespace, when the calling thread is not
// in the namespace the process started in (threadns.Moved), with a handle
// on the thread's namespace, which the reader owns (closed by the returned
// function). The readers renew their subscriptions from their own
// goroutine, on whatever thread the runtime gives it; with netns.None()
// that thread's namespace would be followed, not the caller's (a caller
// that entered a namespace with setns on a locked thread, as the tests and
// embedders do, would get the process's tables after the first overrun).
// A caller in the process's namespace keeps netns.None(): no setns, which
// a process without CAP_SYS_ADMIN (wgpio up as a service) may not do.
func (o *KernelOptions) pinNamespace() (func(), error) {
	if o.Namespace > 0 {
		return func() {}, nil
	}
	h, err := threadns.Moved()
	if err != nil {
		return nil, fmt.Errorf("get the caller's network namespace: %w", err)
	}
	if !h.IsOpen() {
		return func() {}, nil
	}
	o.Namespace = h
	return func() { h.Close() }, nil
}

// KernelRoutes is the Resolver of shared mode: a snapshot of the kernel's
// main routing table (IPv4 and IPv6), swapped atomically and rebuilt from a
// fresh listing whenever the kernel reports a route change (RTNLGRP
// IPv4/IPv6 route notifications), so that changes apply within
// milliseconds, and every NeighbourResync in case a notification was lost.
// Multipath routes use their first next hop; routes that are
// not unicast (blackhole, unreachable, prohibit) answer ok false. NextHop
// is lock-free and safe for concurrent use. Close stops following.
type KernelRoutes struct {
	opts  KernelOptions
	h     *netlink.Handle
	unpin func() // closes the namespace handle pinNamespace took
	snap  atomic.Pointer[routeTable]
	done  chan struct{}
	wg    sync.WaitGroup
	// ignore is the interface index Ignore set (0: none); kick asks the
	// follower for a listing once it is set.
	ignore atomic.Int64
	kick   chan struct{}

	// Updates counts the snapshots built (for tests and metrics).
	Updates atomic.Uint64
}

// NewKernelRoutes lists the kernel's routes and follows their changes. If
// the notification socket fails (an overrun), it subscribes and lists again.
func NewKernelRoutes(opts KernelOptions) (*KernelRoutes, error) {
	unpin, err := opts.pinNamespace()
	if err != nil {
		return nil, fmt.Errorf("arp: kernel routes: %w", err)
	}
	h, err := netlink.NewHandleAt(opts.ns())
	if err != nil {
		unpin()
		return nil, fmt.Errorf("arp: kernel routes: netlink handle: %w", err)
	}
	k := &KernelRoutes{opts: opts, h: h, done: make(chan struct{}), kick: make(chan struct{}, 1), unpin: unpin}
	ch, err := k.subscribe()
	if err != nil {
		close(k.done)
		h.Close()
		unpin()
		return nil, err
	}
	k.wg.Add(1)
	go k.follow(ch)
	return k, nil
}

// subscribe subscribes, then lists, so that no change falls between.
func (k *KernelRoutes) subscribe() (chan netlink.RouteUpdate, error) {
	ch := make(chan netlink.RouteUpdate, 256)
	ns := k.opts.ns()
	// The buffer of the neighbours' socket: a burst of route changes
	// (fastgw's own into its exception TUN, which Ignore leaves out but the
	// socket still receives, 40,000 when 20,000 peers start) overran the
	// default one, and every overrun cost a subscription and a listing.
	sub := netlink.RouteSubscribeOptions{Namespace: &ns, ErrorCallback: func(err error) { report(k.done, k.opts.ErrorCallback, err) }}
	if forceRcvbuf(ns) {
		sub.ReceiveBufferSize, sub.ReceiveBufferForceSize = neighbourRcvbuf, true
	}
	if err := netlink.RouteSubscribeWithOptions(ch, k.done, sub); err != nil {
		return nil, fmt.Errorf("arp: kernel routes: subscribe: %w", err)
	}
	if err := k.reload(); err != nil {
		return nil, err
	}
	return ch, nil
}

// Ignore leaves the routes out of interface ifindex out of the table, and
// their changes cause no listing: fastgw's routes into its exception TUN,
// one per allowed-IPs prefix (200,000 at 100,000 peers), which the gateway
// adds and removes itself with every configuration change. Followed, each
// change listed the whole table again (about 45 ms of CPU per `wg set` at
// 20,000 peers) and a start-up's burst of them overran the notification
// socket. NextHop of a destination routed there answers from the next best
// route (the fast path never sends through that interface). The routes
// already listed leave the table within milliseconds (the follower lists
// again). Safe for concurrent use; ifindex 0 ignores none.
func (k *KernelRoutes) Ignore(ifindex int) {
	k.ignore.Store(int64(ifindex))
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// ignored reports whether a route (or its notification) goes out of the
// interface Ignore set. A multipath route is never ignored.
func (k *KernelRoutes) ignored(r *netlink.Route) bool {
	i := k.ignore.Load()
	return i != 0 && int64(r.LinkIndex) == i
}

// forceRcvbuf reports whether the notification sockets may be given
// neighbourRcvbuf with SO_RCVBUFFORCE, which takes CAP_NET_ADMIN (over
// the namespace ns): it asks on a netlink socket of its own in ns, which
// it closes, at each subscription (they are rare: a start, a renewal
// after an overrun), so that a capability dropped or a namespace of
// another owner is seen. Without it the subscriptions keep the kernel's
// default buffer (net.core.rmem_default), which a burst overruns sooner
// (each overrun costs a renewal and a listing; nothing is lost for good:
// see NewKernelNeighbours). Asked of the subscription's own socket
// instead (netlink's ReceiveBufferForceSize), a refusal leaked that
// socket: netlink v1.3.1 returns the error without closing it, one per
// subscription (TestKernelSubscriptionsWithoutNetAdmin).
func forceRcvbuf(ns netns.NsHandle) bool {
	s, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		return false
	}
	defer s.Close()
	return s.SetReceiveBufferSize(neighbourRcvbuf, true) == nil
}

// report passes err to cb unless done is closed (errors of a closing
// subscription are expected).
func report(done <-chan struct{}, cb func(error), err error) {
	select {
	case <-done:
		return
	default:
	}
	if cb != nil {
		cb(err)
	}
}

// resubscribeDelay is the pause before subscribing again after a failure.
const resubscribeDelay = 100 * time.Millisecond

func (k *KernelRoutes) follow(ch chan netlink.RouteUpdate) {
	defer k.wg.Done()
	// A periodic listing repairs a change whose notification was lost,
	// as KernelNeighbours does.
	resync := time.NewTicker(NeighbourResync)
	defer resync.Stop()
	for {
		var ok bool
		var u netlink.RouteUpdate
		select {
		case <-k.done:
			return
		case <-resync.C:
			if err := k.reload(); err != nil {
				report(k.done, k.opts.ErrorCallback, err)
			}
			continue
		case <-k.kick:
			if err := k.reload(); err != nil {
				report(k.done, k.opts.ErrorCallback, err)
			}
			continue
		case u, ok = <-ch:
		}
		if !ok {
			// The subscription failed: subscribe and list again.
			for {
				select {
				case <-k.done:
					return
				case <-time.After(resubscribeDelay):
				}
				var err error
				if ch, err = k.subscribe(); err == nil {
					break
				}
				report(k.done, k.opts.ErrorCallback, err)
			}
			continue
		}
		// Coalesce a burst of updates into one listing, if one of them
		// is of a route not ignored.
		changed := !k.ignored(&u.Route)
		for drained := false; !drained; {
			select {
			case u, ok := <-ch:
				drained = !ok
				changed = changed || !ok || !k.ignored(&u.Route)
			default:
				drained = true
			}
		}
		if !changed {
			continue
		}
		if err := k.reload(); err != nil {
			report(k.done, k.opts.ErrorCallback, err)
		}
	}
}

func (k *KernelRoutes) reload() error {
	filter := &netlink.Route{Table: unix.RT_TABLE_MAIN, LinkIndex: k.opts.LinkIndex}
	mask := uint64(netlink.RT_FILTER_TABLE)
	if k.opts.LinkIndex != 0 {
		mask |= netlink.RT_FILTER_OIF
	}
	routes, err := k.h.RouteListFiltered(netlink.FAMILY_ALL, filter, mask)
	if err != nil {
		return fmt.Errorf("arp: kernel routes: list: %w", err)
	}
	t := new(routeTable)
	prio := make(map[netip.Prefix]int)
	for _, r := range routes {
		if k.ignored(&r) {
			continue
		}
		pfx, rt, ok := fromKernelRoute(r)
		if !ok {
			continue
		}
		if p, seen := prio[pfx]; seen && p <= r.Priority {
			continue
		}
		prio[pfx] = r.Priority
		t.Insert(pfx, rt)
	}
	k.snap.Store(t)
	k.Updates.Add(1)
	return nil
}

// fromKernelRoute converts a netlink route. Non-unicast routes map to a
// Route with IfIndex -1, which NextHop reports as unreachable.
func fromKernelRoute(r netlink.Route) (netip.Prefix, Route, bool) {
	var pfx netip.Prefix
	if r.Dst != nil {
		a, ok := netip.AddrFromSlice(r.Dst.IP)
		if !ok {
			return pfx, Route{}, false
		}
		ones, _ := r.Dst.Mask.Size()
		pfx = netip.PrefixFrom(a.Unmap(), ones).Masked()
	} else if r.Family == netlink.FAMILY_V6 {
		pfx = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	} else {
		pfx = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	}
	rt := Route{Prefix: pfx, IfIndex: r.LinkIndex}
	if r.Type != 0 && r.Type != unix.RTN_UNICAST {
		rt.IfIndex = -1
		return pfx, rt, true
	}
	gw, idx := r.Gw, r.LinkIndex
	if gw == nil && len(r.MultiPath) > 0 {
		gw, idx = r.MultiPath[0].Gw, r.MultiPath[0].LinkIndex
	}
	if gw != nil {
		if a, ok := netip.AddrFromSlice(gw); ok {
			rt.Gateway = a.Unmap()
		}
	}
	rt.IfIndex = idx
	return pfx, rt, true
}

// NextHop implements Resolver.
func (k *KernelRoutes) NextHop(dst netip.Addr) (netip.Addr, int, bool) {
	dst = dst.Unmap()
	r, ok := k.snap.Load().Lookup(dst.WithZone(""))
	if !ok || r.IfIndex < 0 {
		return netip.Addr{}, 0, false
	}
	return r.nextHop(dst)
}

// Close stops following the kernel and releases the netlink sockets.
func (k *KernelRoutes) Close() error {
	close(k.done)
	k.wg.Wait()
	k.h.Close()
	k.unpin()
	return nil
}

// KernelNeighbours mirrors the kernel's neighbour table (ARP and NDP, one
// interface or all) into a Table in shared mode: it lists the entries,
// then follows RTM_NEWNEIGH/RTM_DELNEIGH notifications. Kernel states map to
// table states: REACHABLE, PERMANENT, NOARP → reachable; STALE, DELAY →
// stale; PROBE → probe; INCOMPLETE → incomplete; FAILED → failed. Entries
// without a 6-byte unicast MAC are skipped.
type KernelNeighbours struct {
	t     *Table
	opts  KernelOptions
	h     *netlink.Handle
	unpin func() // closes the namespace handle pinNamespace took
	done  chan struct{}
	wg    sync.WaitGroup

	// Updates counts the notifications applied.
	Updates atomic.Uint64
	// Resyncs counts the periodic listings (NeighbourResync).
	Resyncs atomic.Uint64
}

// NewKernelNeighbours starts mirroring the kernel's neighbours into t. If
// the notification socket fails (an overrun, as under an ARP storm), it
// subscribes and lists again; and it lists the kernel's entries again every
// NeighbourResync regardless, so that a notification lost in any way (the
// kernel drops them for a full socket) is repaired within that time.
func NewKernelNeighbours(t *Table, opts KernelOptions) (*KernelNeighbours, error) {
	unpin, err := opts.pinNamespace()
	if err != nil {
		return nil, fmt.Errorf("arp: kernel neighbours: %w", err)
	}
	h, err := netlink.NewHandleAt(opts.ns())
	if err != nil {
		unpin()
		return nil, fmt.Errorf("arp: kernel neighbours: netlink handle: %w", err)
	}
	k := &KernelNeighbours{t: t, opts: opts, h: h, done: make(chan struct{}), unpin: unpin}
	sub, err := k.subscribe()
	if err != nil {
		close(k.done)
		h.Close()
		unpin()
		return nil, err
	}
	k.wg.Add(1)
	go k.follow(sub)
	return k, nil
}

// NeighbourResync is how often KernelNeighbours lists the kernel's
// neighbours again besides following its notifications.
const NeighbourResync = 5 * time.Second

// neighbourRcvbuf is the receive buffer asked for the notification socket
// (SO_RCVBUFFORCE, which needs CAP_NET_ADMIN as the gateway has; without it
// the kernel's rmem_max caps it): room for a burst of some thousands of
// notifications before the kernel drops them.
const neighbourRcvbuf = 8 << 20

// neighbourSub is one notification subscription; closing stop closes its
// socket.
type neighbourSub struct {
	ch   chan netlink.NeighUpdate
	stop chan struct{}
}

func (k *KernelNeighbours) subscribe() (neighbourSub, error) {
	sub := neighbourSub{ch: make(chan netlink.NeighUpdate, 1024), stop: make(chan struct{})}
	ns := k.opts.ns()
	opts := netlink.NeighSubscribeOptions{
		Namespace: &ns,
		ErrorCallback: func(err error) {
			select {
			case <-sub.stop: // we closed it: its read error is expected
			default:
				report(k.done, k.opts.ErrorCallback, err)
			}
		},
	}
	if forceRcvbuf(ns) {
		opts.ReceiveBufferSize, opts.ReceiveBufferForceSize = neighbourRcvbuf, true
	}
	if err := netlink.NeighSubscribeWithOptions(sub.ch, sub.stop, opts); err != nil {
		return neighbourSub{}, fmt.Errorf("arp: kernel neighbours: subscribe: %w", err)
	}
	if err := k.list(); err != nil {
		close(sub.stop)
		return neighbourSub{}, err
	}
	return sub, nil
}

// list applies the kernel's current entries (after subscribing, so that
// nothing falls between the listing and the notifications).
func (k *KernelNeighbours) list() error {
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		ns, err := k.h.NeighList(k.opts.LinkIndex, fam)
		if err != nil {
			return fmt.Errorf("arp: kernel neighbours: list: %w", err)
		}
		for _, n := range ns {
			k.apply(n, false)
		}
	}
	return nil
}

func (k *KernelNeighbours) follow(sub neighbourSub) {
	defer k.wg.Done()
	resync := time.NewTicker(NeighbourResync)
	defer resync.Stop()
	defer func() { close(sub.stop) }()
	for {
		select {
		case <-k.done:
			return
		case <-resync.C:
			if err := k.list(); err != nil {
				report(k.done, k.opts.ErrorCallback, err)
			}
			k.Resyncs.Add(1)
		case u, ok := <-sub.ch:
			if ok {
				k.apply(u.Neigh, u.Type == unix.RTM_DELNEIGH)
				k.Updates.Add(1)
				continue
			}
			// The subscription failed (reported through ErrorCallback):
			// close its socket and start another.
			close(sub.stop)
			sub = neighbourSub{}
			for sub.ch == nil {
				select {
				case <-k.done:
					sub.stop = make(chan struct{}) // for the deferred close
					return
				case <-time.After(resubscribeDelay):
				}
				next, err := k.subscribe()
				if err != nil {
					report(k.done, k.opts.ErrorCallback, err)
					continue
				}
				sub = next
			}
		}
	}
}

func (k *KernelNeighbours) apply(n netlink.Neigh, del bool) {
	if k.opts.LinkIndex != 0 && n.LinkIndex != k.opts.LinkIndex {
		return
	}
	ip, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return
	}
	ip = ip.Unmap()
	if ip.IsMulticast() {
		return
	}
	if del {
		k.t.Delete(ip)
		return
	}
	var mac MAC
	if len(n.HardwareAddr) == 6 {
		mac = MAC(n.HardwareAddr)
	}
	st := kernelState(n.State)
	if st.usable() && (mac.IsZero() || mac.IsMulticast()) {
		return
	}
	k.t.Set(ip, mac, st)
}

func kernelState(s int) State {
	switch {
	case s&(netlink.NUD_REACHABLE|netlink.NUD_PERMANENT|netlink.NUD_NOARP) != 0:
		return StateReachable
	case s&(netlink.NUD_STALE|netlink.NUD_DELAY) != 0:
		return StateStale
	case s&netlink.NUD_PROBE != 0:
		return StateProbe
	case s&netlink.NUD_INCOMPLETE != 0:
		return StateIncomplete
	case s&netlink.NUD_FAILED != 0:
		return StateFailed
	}
	return StateNone
}

// Close stops mirroring.
func (k *KernelNeighbours) Close() error {
	close(k.done)
	k.wg.Wait()
	k.h.Close()
	k.unpin()
	return nil
}

// KernelProber is the Prober of shared mode: it asks the kernel to resolve
// a neighbour (RTM_NEWNEIGH with NTF_USE, the kernel's neigh_event_send:
// an incomplete entry is made and the kernel sends its ARP request or NS;
// a stale one is probed). The answer reaches the table through
// KernelNeighbours. Errors are counted.
type KernelProber struct {
	Handle    *netlink.Handle
	LinkIndex int
	Errors    atomic.Uint64
	LastError atomic.Pointer[error]
}

// Probe implements Prober; unicast and mac are left to the kernel.
func (p *KernelProber) Probe(ip netip.Addr, _ MAC, _ bool) {
	fam := netlink.FAMILY_V4
	if ip.Is6() {
		fam = netlink.FAMILY_V6
	}
	err := p.Handle.NeighSet(&netlink.Neigh{
		LinkIndex: p.LinkIndex, Family: fam, IP: net.IP(ip.AsSlice()),
		Flags: netlink.NTF_USE,
	})
	if err != nil {
		err = fmt.Errorf("arp: ask kernel to resolve %v: %w", ip, err)
		p.Errors.Add(1)
		p.LastError.Store(&err)
	}
}

// JoinGroup makes the interface ifname receive the Ethernet multicast
// address of the IPv6 group (RFC 2464 §7), as owned mode needs for the
// solicited-node groups of our addresses (Responder.SolicitedNodeGroups):
// SIOCADDMULTI, the call behind `ip maddr add`. Membership is counted by
// the kernel and lasts until LeaveGroup or the interface goes away. It acts
// in the caller's network namespace (the current thread's).
func JoinGroup(ifname string, group netip.Addr) error {
	return multi(unix.SIOCADDMULTI, ifname, group)
}

// LeaveGroup undoes JoinGroup.
func LeaveGroup(ifname string, group netip.Addr) error {
	return multi(unix.SIOCDELMULTI, ifname, group)
}

// ifreqHW is struct ifreq with the ifr_hwaddr member (<linux/if.h>):
// the name, then a struct sockaddr (family, 14 bytes of data), padded to
// the union's 24 bytes.
type ifreqHW struct {
	name   [unix.IFNAMSIZ]byte
	family uint16
	data   [14]byte
	_      [8]byte
}

func multi(req uintptr, ifname string, group netip.Addr) error {
	if !group.Is6() || !group.IsMulticast() {
		return fmt.Errorf("arp: multicast group: %v is not an IPv6 multicast group", group)
	}
	if len(ifname) == 0 || len(ifname) >= unix.IFNAMSIZ {
		return fmt.Errorf("arp: multicast group: bad interface name %q", ifname)
	}
	var ifr ifreqHW
	copy(ifr.name[:], ifname)
	ifr.family = unix.AF_UNSPEC
	mac := MulticastMAC(group)
	copy(ifr.data[:], mac[:])
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("arp: multicast group: %w", os.NewSyscallError("socket", err))
	}
	defer unix.Close(fd)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(unsafe.Pointer(&ifr)))
	if errno != 0 {
		return fmt.Errorf("arp: multicast group %v on %s: %w", group, ifname, os.NewSyscallError("ioctl", errno))
	}
	return nil
}

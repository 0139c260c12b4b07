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
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/internal/nldump"
	"github.com/wgpio/wgpio/internal/nlrcvbuf"
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
	// closeOnce makes Close safe to call twice, or concurrently.
	closeOnce sync.Once

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
// neighbours again besides following its notifications, at least: a
// listing that took longer than NeighbourResync/resyncShare is followed
// by resyncShare times its own time (resyncAfter), so that listing costs
// the follower 2% of a core at most (a listing takes some 8 µs an entry,
// mostly netlink's decoding: 0.4 s at 50,000 neighbours, which every 5 s
// was 8% of a core).
const NeighbourResync = 5 * time.Second

// resyncShare: a listing takes at most one resyncShare-th of the
// follower's time.
const resyncShare = 50

// resyncAfter is the wait before the next listing after one that took d.
func resyncAfter(d time.Duration) time.Duration { return max(NeighbourResync, resyncShare*d) }

// neighbourRcvbuf is the receive buffer forced on the notification socket
// when the process may (nlrcvbuf).
const neighbourRcvbuf = nlrcvbuf.Size

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
	if nlrcvbuf.Forceable(ns) {
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
// nothing falls between the listing and the notifications), then deletes
// the mirrored entries the kernel no longer lists (Table.PruneKernel):
// one deleted while notifications were lost (an overrun, ENOBUFS) stayed
// before, usable at its old MAC, for as long as the table lived; the
// notifications of a change during the listing follow it, as the
// follower reads them after.
func (k *KernelNeighbours) list() error {
	listed := map[netip.Addr]struct{}{}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		ns, err := nldump.Retry(func() ([]netlink.Neigh, error) { return k.h.NeighList(k.opts.LinkIndex, fam) })
		if err != nil {
			return fmt.Errorf("arp: kernel neighbours: list: %w", err)
		}
		for _, n := range ns {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && (k.opts.LinkIndex == 0 || n.LinkIndex == k.opts.LinkIndex) {
				listed[key(ip)] = struct{}{}
			}
			k.apply(n, false)
		}
	}
	k.t.PruneKernel(listed)
	return nil
}

func (k *KernelNeighbours) follow(sub neighbourSub) {
	defer k.wg.Done()
	resync := time.NewTimer(NeighbourResync)
	defer resync.Stop()
	defer func() { close(sub.stop) }()
	for {
		select {
		case <-k.done:
			return
		case <-resync.C:
			began := time.Now()
			if err := k.list(); err != nil {
				report(k.done, k.opts.ErrorCallback, err)
			}
			k.Resyncs.Add(1)
			resync.Reset(resyncAfter(time.Since(began)))
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

// Close stops mirroring. A second call (or one concurrent with it) does
// nothing more and returns nil once the first is done.
func (k *KernelNeighbours) Close() error {
	k.closeOnce.Do(func() {
		close(k.done)
		k.wg.Wait()
		k.h.Close()
		k.unpin()
	})
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
// SIOCADDMULTI, the call behind `ip maddr add`. No MLD report announces
// such a membership, so a switch that snoops MLD does not forward the
// group to the interface: JoinGroups joins with a socket, which does.
// Membership is counted by the kernel and lasts until LeaveGroup or the
// interface goes away. It acts in the caller's network namespace (the
// current thread's).
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

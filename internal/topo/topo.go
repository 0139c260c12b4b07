//go:build linux

package topo

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Topology owns namespaces and the links in them. Safe for concurrent use.
type Topology struct {
	prefix string

	mu      sync.Mutex
	closers []func() error // guarded by mu; run in reverse on Close
	nss     []*NS          // guarded by mu
}

// New returns an empty topology whose names start with prefix (at most 6
// bytes are used).
func New(prefix string) *Topology {
	if len(prefix) > 6 {
		prefix = prefix[:6]
	}
	return &Topology{prefix: prefix}
}

// UniqueName returns prefix followed by 8 random hex digits, with no
// separator; when that is longer than 15 bytes (IFNAMSIZ − 1, the longest
// interface name), only its last 15 bytes, so that the random digits stay
// whole and the prefix loses its head.
func UniqueName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	s := prefix + hex.EncodeToString(b[:])
	if len(s) > 15 {
		s = s[len(s)-15:]
	}
	return s
}

// Name returns a fresh unique name with the topology's prefix and a role
// letter, e.g. "wgtst" + "a" + 8 hex digits.
func (t *Topology) Name(role string) string {
	return UniqueName(t.prefix + role)
}

func (t *Topology) onClose(f func() error) {
	t.mu.Lock()
	t.closers = append(t.closers, f)
	t.mu.Unlock()
}

// Close removes everything the topology made, newest first, and returns the
// errors joined. Safe to call more than once.
func (t *Topology) Close() error {
	t.mu.Lock()
	cl := t.closers
	t.closers = nil
	t.mu.Unlock()
	var errs []error
	for i := len(cl) - 1; i >= 0; i-- {
		if err := cl[i](); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// NS is a named network namespace (visible to `ip netns`).
type NS struct {
	Name   string
	handle netns.NsHandle
	nl     *netlink.Handle
}

// Handle is a netlink handle operating inside the namespace.
func (n *NS) Handle() *netlink.Handle { return n.nl }

// NsHandle is the namespace's file handle (owned by NS; do not close).
func (n *NS) NsHandle() netns.NsHandle { return n.handle }

// NewNS makes a named namespace with its loopback up.
func (t *Topology) NewNS(role string) (*NS, error) {
	name := t.Name(role)
	if err := sharedNetnsDir(); err != nil {
		return nil, fmt.Errorf("make %s a shared mount point, as `ip netns add` does: %w", netnsDir, err)
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("get current netns: %w", err)
	}
	h, err := netns.NewNamed(name)
	if serr := netns.Set(orig); serr != nil {
		// This thread is now in the wrong namespace: leave it locked so
		// that the runtime discards it when the goroutine exits.
		orig.Close()
		return nil, fmt.Errorf("restore netns: %w", serr)
	}
	orig.Close()
	runtime.UnlockOSThread()
	if err != nil {
		return nil, fmt.Errorf("create netns %s: %w", name, err)
	}
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		h.Close()
		_ = netns.DeleteNamed(name)
		return nil, fmt.Errorf("netlink handle in %s: %w", name, err)
	}
	ns := &NS{Name: name, handle: h, nl: nl}
	t.onClose(func() error {
		nl.Close()
		h.Close()
		if err := netns.DeleteNamed(name); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("delete netns %s: %w", name, err)
		}
		return nil
	})
	t.mu.Lock()
	t.nss = append(t.nss, ns)
	t.mu.Unlock()
	// No duplicate address detection in a throwaway namespace: tentative
	// link-local addresses delay the first IPv6 exchanges by seconds.
	// (/proc/sys/net is the opening thread's namespace's.)
	if err := ns.Do(func() error {
		for _, k := range []string{"all", "default"} {
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+k+"/accept_dad", []byte("0"), 0); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("turn off IPv6 DAD in %s: %w", name, err)
	}
	lo, err := nl.LinkByName("lo")
	if err == nil {
		err = nl.LinkSetUp(lo)
	}
	if err != nil {
		return nil, fmt.Errorf("set lo up in %s: %w", name, err)
	}
	return ns, nil
}

// netnsDir is where named namespaces are bind-mounted (iproute2's
// NETNS_RUN_DIR, netns.NewNamed's).
const netnsDir = "/run/netns"

// sharedNetnsDir makes netnsDir a mount point of its own with shared
// propagation, as iproute2 does before its first `ip netns add`
// (ip/ipnetns.c, netns_add), once per process. netns.NewNamed does not:
// the first `ip netns add` run by anyone while namespaces of ours exist
// then bind-mounts the directory over itself, which hides their mounts,
// and deleting them fails with EBUSY (a bench run left four behind when
// a namespace was added by hand meanwhile).
func sharedNetnsDir() error {
	netnsDirOnce.Do(func() {
		if netnsDirErr = os.MkdirAll(netnsDir, 0o755); netnsDirErr != nil {
			return
		}
		// A mount point already (iproute2's, or a bind of the system's):
		// shared, and done.
		netnsDirErr = unix.Mount("", netnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
		if !errors.Is(netnsDirErr, unix.EINVAL) {
			return
		}
		// Not a mount point: bind it on itself, then share it.
		if netnsDirErr = unix.Mount(netnsDir, netnsDir, "none", unix.MS_BIND|unix.MS_REC, ""); netnsDirErr != nil {
			return
		}
		netnsDirErr = unix.Mount("", netnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	})
	return netnsDirErr
}

var (
	netnsDirOnce sync.Once
	netnsDirErr  error
)

// Do runs fn on a locked OS thread inside the namespace and returns its
// error. Goroutines fn starts do not inherit the namespace.
func (n *NS) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("get current netns: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(n.handle); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter netns %s: %w", n.Name, err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			// Keep the thread locked: the runtime ends it with the goroutine.
			errc <- errors.Join(ferr, fmt.Errorf("restore netns: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Command returns a command that runs name with args inside the namespace
// (through `ip netns exec`, so it needs iproute2; the rest of the package
// needs no binaries).
func (n *NS) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Run runs a command inside the namespace and returns its combined output;
// the error includes the output.
func (n *NS) Run(name string, args ...string) (string, error) {
	out, err := n.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s in %s: %w: %s", name, strings.Join(args, " "), n.Name, err, out)
	}
	return string(out), nil
}

// Ping pings dst from the namespace (ping(8), one packet a second) until one
// answer comes, within timeout.
func (n *NS) Ping(dst netip.Addr, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if _, err = n.Run("ping", "-c", "1", "-W", "1", dst.String()); err == nil {
			return nil
		}
	}
	return fmt.Errorf("ping %v from %s: no answer in %v: %w", dst, n.Name, timeout, err)
}

// VethConfig describes a veth pair.
type VethConfig struct {
	// Queues is the number of RX and TX queues on each end (default 1).
	Queues int
	// MTU of both ends (default 1500). Native XDP on veth needs the peer's
	// MTU at most 3506.
	MTU int
	// KeepTXOffload leaves TX checksum offload on. By default it is turned
	// off on both ends: with it on, veth hands partial L4 checksums to the
	// other end, and frames redirected to AF_XDP keep them.
	KeepTXOffload bool
}

// Veth is one veth pair; A lives in NSA, B in NSB.
type Veth struct {
	A, B     string
	NSA, NSB *NS
}

// NewVeth makes a veth pair with one end in a and the other in b, both up.
func (t *Topology) NewVeth(a, b *NS, cfg VethConfig) (*Veth, error) {
	if cfg.Queues <= 0 {
		cfg.Queues = 1
	}
	if cfg.MTU <= 0 {
		cfg.MTU = 1500
	}
	na, nb := t.Name("v"), t.Name("v")
	la := netlink.NewLinkAttrs()
	la.Name = na
	la.MTU = cfg.MTU
	la.NumTxQueues = cfg.Queues
	la.NumRxQueues = cfg.Queues
	v := &netlink.Veth{
		LinkAttrs:       la,
		PeerName:        nb,
		PeerNamespace:   netlink.NsFd(int(b.handle)),
		PeerNumTxQueues: uint32(cfg.Queues),
		PeerNumRxQueues: uint32(cfg.Queues),
		PeerMTU:         uint32(cfg.MTU),
		PeerTxQLen:      -1,
	}
	if err := a.nl.LinkAdd(v); err != nil {
		return nil, fmt.Errorf("add veth %s/%s: %w", na, nb, err)
	}
	for _, e := range []struct {
		ns   *NS
		name string
	}{{a, na}, {b, nb}} {
		l, err := e.ns.nl.LinkByName(e.name)
		if err != nil {
			return nil, fmt.Errorf("find %s in %s: %w", e.name, e.ns.Name, err)
		}
		if err := e.ns.nl.LinkSetUp(l); err != nil {
			return nil, fmt.Errorf("set %s up: %w", e.name, err)
		}
		if !cfg.KeepTXOffload {
			if err := e.ns.SetTXChecksum(e.name, false); err != nil {
				return nil, err
			}
		}
	}
	return &Veth{A: na, B: nb, NSA: a, NSB: b}, nil
}

// AddAddr adds an address in CIDR form ("198.18.0.1/24", "2001:db8::1/64")
// to dev. IPv6 addresses skip duplicate address detection.
func (n *NS) AddAddr(dev, cidr string) error {
	l, err := n.nl.LinkByName(dev)
	if err != nil {
		return fmt.Errorf("find %s in %s: %w", dev, n.Name, err)
	}
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		return fmt.Errorf("parse address %q: %w", cidr, err)
	}
	if a.IP.To4() == nil {
		a.Flags |= netlinkNoDAD
	}
	if err := n.nl.AddrAdd(l, a); err != nil {
		return fmt.Errorf("add %s to %s in %s: %w", cidr, dev, n.Name, err)
	}
	return nil
}

// netlinkNoDAD is IFA_F_NODAD.
const netlinkNoDAD = 0x02

// AddRoute adds a route to dst ("198.18.2.0/24" or "default") via gw (may be
// empty for an on-link route through dev).
func (n *NS) AddRoute(dst, gw, dev string) error {
	r := &netlink.Route{}
	if dst != "default" {
		_, ipn, err := net.ParseCIDR(dst)
		if err != nil {
			return fmt.Errorf("parse route destination %q: %w", dst, err)
		}
		r.Dst = ipn
	}
	if gw != "" {
		g, err := netip.ParseAddr(gw)
		if err != nil {
			return fmt.Errorf("parse gateway %q: %w", gw, err)
		}
		r.Gw = net.IP(g.AsSlice())
		if dst == "default" && g.Is6() {
			r.Family = netlink.FAMILY_V6
		}
	}
	if dev != "" {
		l, err := n.nl.LinkByName(dev)
		if err != nil {
			return fmt.Errorf("find %s in %s: %w", dev, n.Name, err)
		}
		r.LinkIndex = l.Attrs().Index
	}
	if err := n.nl.RouteAdd(r); err != nil {
		return fmt.Errorf("add route %s via %q dev %q in %s: %w", dst, gw, dev, n.Name, err)
	}
	return nil
}

// Sysctl writes a sysctl inside the namespace (key like
// "net.ipv4.ip_forward") through /proc/sys, without the sysctl binary.
func (n *NS) Sysctl(key, value string) error {
	if key == "" || strings.Contains(key, "/") || strings.Contains(key, "..") {
		return fmt.Errorf("sysctl key %q: want dotted names like net.ipv4.ip_forward", key)
	}
	path := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
	// /proc/sys/net belongs to the network namespace of the thread that
	// opens the file.
	if err := n.Do(func() error { return os.WriteFile(path, []byte(value), 0) }); err != nil {
		return fmt.Errorf("sysctl %s=%s in %s: %w", key, value, n.Name, err)
	}
	return nil
}

// Forwarding turns IPv4 and IPv6 forwarding on in the namespace (a router).
func (n *NS) Forwarding() error {
	if err := n.Sysctl("net.ipv4.ip_forward", "1"); err != nil {
		return err
	}
	return n.Sysctl("net.ipv6.conf.all.forwarding", "1")
}

// LinkMAC returns the hardware address of dev in the namespace.
func (n *NS) LinkMAC(dev string) (net.HardwareAddr, error) {
	l, err := n.nl.LinkByName(dev)
	if err != nil {
		return nil, fmt.Errorf("find %s in %s: %w", dev, n.Name, err)
	}
	return l.Attrs().HardwareAddr, nil
}

// LinkUp sets dev in the namespace up.
func (n *NS) LinkUp(dev string) error {
	l, err := n.nl.LinkByName(dev)
	if err != nil {
		return fmt.Errorf("find %s in %s: %w", dev, n.Name, err)
	}
	if err := n.nl.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up in %s: %w", dev, n.Name, err)
	}
	return nil
}

// LinkDrops returns the packets the kernel dropped at the links of the
// namespace, summed over every link (rx_dropped, tx_dropped and
// rx_missed_errors of each; a veth counts there the frames its peer had no
// room for), and a description of each link's nonzero counts, for a test's
// log. Compare two readings: the counters start when the link is created.
func (n *NS) LinkDrops() (total uint64, detail string, err error) {
	links, err := n.nl.LinkList()
	if err != nil {
		return 0, "", fmt.Errorf("list links in %s: %w", n.Name, err)
	}
	var b strings.Builder
	for _, l := range links {
		st := l.Attrs().Statistics
		if st == nil {
			continue
		}
		d := st.RxDropped + st.TxDropped + st.RxMissedErrors
		if d == 0 {
			continue
		}
		total += d
		fmt.Fprintf(&b, " %s/%s rx_dropped=%d tx_dropped=%d rx_missed=%d", n.Name, l.Attrs().Name, st.RxDropped, st.TxDropped, st.RxMissedErrors)
	}
	return total, b.String(), nil
}

// LinkDrops sums NS.LinkDrops over the namespaces nss (nil ones skipped,
// as a site without a router has none), with their descriptions joined.
func LinkDrops(nss ...*NS) (total uint64, detail string, err error) {
	var b strings.Builder
	for _, n := range nss {
		if n == nil {
			continue
		}
		d, text, err := n.LinkDrops()
		if err != nil {
			return 0, "", err
		}
		total += d
		b.WriteString(text)
	}
	return total, b.String(), nil
}

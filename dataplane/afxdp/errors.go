//go:build linux

package afxdp

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/wgpio/wgpio/dataplane"
	"golang.org/x/sys/unix"
)

// Errors returned by Open, wrapped with the interface, the cause and the
// fix; test with errors.Is.
var (
	// ErrNoSuchInterface: the interface does not exist in the caller's
	// network namespace.
	ErrNoSuchInterface = errors.New("afxdp: no such interface")
	// ErrQueueOutOfRange wraps dataplane.ErrNoSuchQueue: more queues asked
	// for than the device has RX queues.
	ErrQueueOutOfRange = fmt.Errorf("afxdp: %w", dataplane.ErrNoSuchQueue)
	// ErrXDPUnsupported: the driver refused the XDP program in the asked
	// mode (or zero-copy was asked and the driver lacks it).
	ErrXDPUnsupported = fmt.Errorf("afxdp: XDP mode not supported by the driver: %w", dataplane.ErrNotSupported)
	// ErrMTUTooLarge: the device's (or veth peer's) MTU is above the limit
	// for native XDP.
	ErrMTUTooLarge = errors.New("afxdp: MTU too large for native XDP")
	// ErrMemlock: the kernel refused to pin the UMEM or create a map for
	// lack of locked memory (RLIMIT_MEMLOCK on kernels before 5.11).
	ErrMemlock = errors.New("afxdp: RLIMIT_MEMLOCK too low")
	// ErrPermission: the caller lacks CAP_NET_ADMIN, CAP_NET_RAW or
	// CAP_BPF.
	ErrPermission = errors.New("afxdp: missing privileges")
	// ErrNotEthernet: the interface does not carry Ethernet frames (the
	// loopback, a TUN, a WireGuard or other layer-3 device), which a
	// port's frames are.
	ErrNotEthernet = errors.New("afxdp: not an Ethernet interface")
)

// CheckEthernet returns an error wrapping ErrNotEthernet, naming l and its
// link type, unless l is an Ethernet interface (ARPHRD_ETHER: a NIC, a
// veth, a bridge, a bond, a VLAN device).
func CheckEthernet(l netlink.Link) error {
	a := l.Attrs()
	if a.EncapType == "ether" && len(a.HardwareAddr) == 6 {
		return nil
	}
	return fmt.Errorf("%w: %s is of link type %q (ip -d link show %s): name the NIC or veth that carries the traffic", ErrNotEthernet, a.Name, a.EncapType, a.Name)
}

// vethMaxXDPMTU is the largest veth peer MTU that allows native XDP on
// 4 KiB pages: a frame plus XDP headroom and skb_shared_info must fit one
// page (drivers/net/veth.c, veth_xdp_set).
const vethMaxXDPMTU = 3506

// diagnose adds the cause and fix to errors whose errno says what is
// missing.
func diagnose(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("%w (AF_XDP needs root or CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF: run as root or setcap cap_net_admin,cap_net_raw,cap_bpf+ep on the binary): %w", ErrPermission, err)
	case errors.Is(err, unix.ENOBUFS), errors.Is(err, unix.ENOMEM):
		return &MemlockError{Limit: memlockNow(), Err: err}
	case errors.Is(err, unix.EMFILE):
		return fmt.Errorf("the process's open-file limit is reached (RLIMIT_NOFILE %s; a gateway holds a few descriptors a queue and a port besides its sockets and maps, and Go raises the soft limit to the hard one at start): "+
			"raise the hard limit with ulimit -Hn or systemd's LimitNOFILE=: %w", rlimitNow(unix.RLIMIT_NOFILE, 1, ""), err)
	case errors.Is(err, unix.ENFILE):
		return fmt.Errorf("the system's open-file limit is reached (sysctl fs.file-max, fs.file-nr): %w", err)
	}
	return err
}

// MemlockError is the error of memory the kernel would not lock for
// AF_XDP (ENOMEM or ENOBUFS): a UMEM's pages, which count against
// RLIMIT_MEMLOCK unless the process has CAP_IPC_LOCK (Linux's
// xdp_umem_account_pages), and before Linux 5.11 the BPF maps too.
// errors.Is(err, ErrMemlock) holds, and it wraps the errno's error. Its
// text gives the limit and the fixes, the last a smaller UMEM in afxdp's
// terms (Config.NumFrames, UMEMConfig.NumFrames); Smaller, when set,
// says it in the terms of a caller whose users size the UMEM otherwise
// (a gateway's queues): MemlockInTermsOf gives an error its words.
type MemlockError struct {
	// Limit is the process's RLIMIT_MEMLOCK when it failed, soft and
	// hard ("now 8192 KiB, hard limit 8192 KiB").
	Limit string
	// Smaller is how to ask for a smaller UMEM; "" is afxdp's own,
	// fewer frames (Config.NumFrames).
	Smaller string
	// Err is the failed call's error, wrapping the errno.
	Err error
}

func (e *MemlockError) Error() string {
	smaller := e.Smaller
	if smaller == "" {
		smaller = "use fewer frames, Config.NumFrames"
	}
	return fmt.Sprintf("%v (%s; the UMEM and BPF maps count against it unless the process has CAP_IPC_LOCK, which root in a container often lacks: "+
		"raise it with ulimit -l unlimited or systemd's LimitMEMLOCK=infinity, grant CAP_IPC_LOCK, or %s): %v", ErrMemlock, e.Limit, smaller, e.Err)
}

// Is makes errors.Is(e, ErrMemlock) hold.
func (e *MemlockError) Is(target error) bool { return target == ErrMemlock }

// Unwrap returns the failed call's error.
func (e *MemlockError) Unwrap() error { return e.Err }

// MemlockInTermsOf returns err, which may wrap a *MemlockError, with
// that error's advice of a smaller UMEM given as smaller: the terms of
// a caller whose users size the UMEM otherwise (a gateway's frames or
// queues, a binary's Queues key), in place of afxdp's Config.NumFrames or
// of an earlier caller's words. errors.Is and errors.As see err as it was;
// an err without a MemlockError, or whose text no longer holds the
// advice, is returned unchanged.
func MemlockInTermsOf(err error, smaller string) error {
	var me *MemlockError
	if !errors.As(err, &me) {
		return err
	}
	said := me.Error()
	var earlier *memlockReworded
	if errors.As(err, &earlier) {
		said = earlier.said
	}
	msg := err.Error()
	if !strings.Contains(msg, said) {
		return err
	}
	ours := *me
	ours.Smaller = smaller
	now := ours.Error()
	return &memlockReworded{msg: strings.Replace(msg, said, now, 1), said: now, err: err}
}

// memlockReworded is err, which wraps a MemlockError, said with that
// error's text replaced by said (MemlockInTermsOf).
type memlockReworded struct {
	msg, said string
	err       error
}

func (e *memlockReworded) Error() string { return e.msg }
func (e *memlockReworded) Unwrap() error { return e.err }

// rlimitNow describes this process's limit of resource, soft and hard,
// in units of unit named by suffix.
func rlimitNow(resource int, unit uint64, suffix string) string {
	var l unix.Rlimit
	if err := unix.Getrlimit(resource, &l); err != nil {
		return "its value unreadable"
	}
	f := func(v uint64) string {
		if v == unix.RLIM_INFINITY {
			return "unlimited"
		}
		return fmt.Sprintf("%d%s", v/unit, suffix)
	}
	return "now " + f(l.Cur) + ", hard limit " + f(l.Max)
}

// memlockNow describes this process's RLIMIT_MEMLOCK, soft and hard.
func memlockNow() string { return rlimitNow(unix.RLIMIT_MEMLOCK, 1024, " KiB") }

// attachError is the error of attaching the XDP program in mode
// ("native", "generic") to p, with its cause and fix where err's errno
// says them (a veth's limits among them); nil for nil.
func (p *Port) attachError(mode string, err error) error {
	if err == nil {
		return nil
	}
	driver := p.driver
	switch {
	case errors.Is(err, unix.ERANGE):
		if driver == "veth" {
			return fmt.Errorf("%w: attach %s XDP on veth %s needs its peer's MTU at most %d (this end has MTU %d): lower the MTU of both ends (%s) or use AttachGeneric: %w",
				ErrMTUTooLarge, mode, p.name, vethMaxXDPMTU, p.mtu, vethMTUFix(p.name, p.ifindex), err)
		}
		return fmt.Errorf("%w: attach %s XDP with MTU %d on %s driver %s: lower the MTU (ip link set dev %s mtu 1500) or use AttachGeneric: %w", ErrMTUTooLarge, mode, p.mtu, p.name, driver, p.name, err)
	case errors.Is(err, unix.ENOSPC) && driver == "veth":
		return fmt.Errorf("%w: %s XDP on veth needs at least as many RX queues as the peer has TX queues (recreate the pair with equal queue counts) or AttachGeneric: %w", ErrXDPUnsupported, mode, err)
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EINVAL):
		return fmt.Errorf("%w: attach %s XDP on %s (driver %q): use AttachGeneric or AttachAuto: %w", ErrXDPUnsupported, mode, p.name, driver, err)
	case errors.Is(err, unix.EBUSY), errors.Is(err, unix.EEXIST):
		return fmt.Errorf("attach %s XDP: another XDP program is attached to %s (see `ip link show dev %s`; detach it with `ip link set dev %s xdp off`): %w", mode, p.name, p.name, p.name, err)
	}
	return diagnose(fmt.Errorf("attach %s XDP: %w", mode, err))
}

// vethPeer returns the name of the other end of veth ifindex when it is in
// this network namespace (a veth's IFLA_LINK is its peer's index, in the
// namespace IFLA_LINK_NETNSID names when that is another).
func vethPeer(ifindex int) (string, bool) {
	if l, err := netlink.LinkByIndex(ifindex); err == nil && l.Attrs().NetNsID < 0 {
		if pl, err := netlink.LinkByIndex(l.Attrs().ParentIndex); err == nil && pl.Attrs().Index != ifindex {
			return pl.Attrs().Name, true
		}
	}
	return "", false
}

// vethMTUFix is the command that lowers the MTU of veth name (ifindex)
// and of its peer to 1500, naming the peer when it is in this network
// namespace.
func vethMTUFix(name string, ifindex int) string {
	if peer, ok := vethPeer(ifindex); ok {
		return fmt.Sprintf("ip link set dev %s mtu 1500; ip link set dev %s mtu 1500", name, peer)
	}
	return fmt.Sprintf("ip link set dev %s mtu 1500, and in the peer's network namespace ip link set dev ITS-PEER mtu 1500", name)
}

//go:build linux

package afxdp

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"github.com/wgpio/wgpio/dataplane"
	"golang.org/x/sys/unix"
)

// Kernel and driver features a port depends on, probed once each and
// cached, as cilium/ebpf's features package does (its internal/feature.go).
// A probe returns:
//
//   - nil: the feature is there;
//   - a *FeatureError (errors.Is(err, dataplane.ErrNotSupported)): it is
//     not, for certain; the result is cached;
//   - another error: the probe could not tell (no privileges, a kernel too
//     old to answer the question); not cached, and the caller tries the
//     feature as if present.
//
// Open consults them before deciding native or generic XDP, a shared or a
// private UMEM, and need_wakeup, instead of finding out by failing.

// FeatureError says a feature is missing from the running kernel or from a
// device's driver. It matches dataplane.ErrNotSupported with errors.Is,
// and ebpf.ErrNotSupported too where cilium/ebpf's probe said so.
type FeatureError struct {
	// Feature names what is missing, e.g. "AF_XDP shared UMEM across
	// devices and queues".
	Feature string
	// MinKernel is the first Linux release with the feature ("5.10"), or
	// "" where a newer kernel does not bring it (a driver's feature).
	MinKernel string
	// Kernel is the running kernel's release (uname -r).
	Kernel string
	// Fix says how to get it or what to do instead; may be "".
	Fix string
	// Err is what the probe saw; may be nil.
	Err error
}

func (e *FeatureError) Error() string {
	s := fmt.Sprintf("afxdp: %s not supported by Linux %s", e.Feature, e.Kernel)
	if e.MinKernel != "" {
		s += " (needs Linux " + e.MinKernel + " or later)"
	}
	if e.Fix != "" {
		s += ": " + e.Fix
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns dataplane.ErrNotSupported and the probe's evidence.
func (e *FeatureError) Unwrap() []error {
	if e.Err == nil {
		return []error{dataplane.ErrNotSupported}
	}
	return []error{dataplane.ErrNotSupported, e.Err}
}

// errAbsent marks a probe's conclusive "not there" (as ebpf.ErrNotSupported
// does for cilium/ebpf's probes).
var errAbsent = errors.New("absent")

// absentError is a probe's conclusive answer; it matches errAbsent and
// says what the probe saw.
type absentError struct{ error }

func (absentError) Is(target error) bool { return target == errAbsent }

// absent is a probe's conclusive answer, with what it saw.
func absent(format string, args ...any) error {
	return absentError{fmt.Errorf(format, args...)}
}

// conclusive reports whether a probe's error means "not there".
func conclusive(err error) bool {
	return errors.Is(err, errAbsent) || errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, dataplane.ErrNotSupported)
}

// featureTest is one probe and its cached result. Safe for concurrent use.
type featureTest struct {
	name, minKernel, fix string
	fn                   func() error

	mu     sync.Mutex
	done   bool
	result error
}

// result runs the probe the first time and after inconclusive answers, and
// returns the cached result otherwise.
func (t *featureTest) run() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return t.result
	}
	err := t.fn()
	switch {
	case err == nil:
		t.done = true
	case conclusive(err):
		t.done, t.result = true, t.notSupported(err)
	default:
		return fmt.Errorf("afxdp: probe %s: %w", t.name, err)
	}
	return t.result
}

func (t *featureTest) notSupported(err error) *FeatureError {
	if fe := (*FeatureError)(nil); errors.As(err, &fe) {
		return fe
	}
	if ae := (absentError{}); errors.As(err, &ae) {
		err = ae.error // the evidence, without the marker
	}
	return &FeatureError{Feature: t.name, MinKernel: t.minKernel, Kernel: kernelRelease(), Fix: t.fix, Err: err}
}

// kernelRelease is uname -r.
var kernelRelease = sync.OnceValue(func() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return "(unknown release)"
	}
	return unix.ByteSliceToString(u.Release[:])
})

// The probes. Tests replace them to force a failure.
var (
	haveSharedUMEM = (&featureTest{
		name:      "AF_XDP shared UMEM across devices and queues (XDP_SHARED_UMEM with its own fill and completion rings)",
		minKernel: "5.10",
		fix:       "upgrade the kernel; meanwhile each port gets a private UMEM and frames between them are copied",
		fn:        probeSharedUMEM,
	}).run
	haveNeedWakeup = (&featureTest{
		name:      "AF_XDP need_wakeup (XDP_USE_NEED_WAKEUP)",
		minKernel: "5.4",
		fix:       "upgrade the kernel; meanwhile the ports wake the kernel on every transmit",
		fn:        probeNeedWakeup,
	}).run
)

// HaveSharedUMEM reports whether the kernel lets sockets on other queues
// and devices share a UMEM, each with its own fill and completion rings
// (Linux 5.10; net/xdp/xsk.c keeps the rings of a socket without a UMEM of
// its own since then). It needs CAP_NET_RAW to tell.
func HaveSharedUMEM() error { return haveSharedUMEM() }

// HaveNeedWakeup reports whether the kernel has AF_XDP's need_wakeup flag
// (Linux 5.4), with which the ports make a system call only when the
// kernel asks for one. It needs CAP_NET_RAW to tell.
func HaveNeedWakeup() error { return haveNeedWakeup() }

// probeSharedUMEM sets a fill ring on an AF_XDP socket without a UMEM:
// kernels before 5.10 keep the fill ring in the UMEM and refuse (EINVAL),
// later ones keep it with the socket, which is what sharing across queues
// and devices needs (the kernel commit "xsk: Move fill and completion
// rings to buffer pool").
func probeSharedUMEM() error {
	fd, err := xdpSocket()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	err = unix.SetsockoptInt(fd, unix.SOL_XDP, unix.XDP_UMEM_FILL_RING, 64)
	if errors.Is(err, unix.EINVAL) {
		return absent("a fill ring without a registered UMEM is refused: %w", os.NewSyscallError("setsockopt XDP_UMEM_FILL_RING", err))
	}
	return os.NewSyscallError("setsockopt XDP_UMEM_FILL_RING", err)
}

// probeNeedWakeup asks for the ring offsets with room for the rings' flags
// word: kernels with need_wakeup (5.4, which added the flags with it)
// fill that layout, older ones answer with the shorter one.
func probeNeedWakeup() error {
	fd, err := xdpSocket()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var off unix.XDPMmapOffsets
	n := uint32(unsafe.Sizeof(off))
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_MMAP_OFFSETS,
		uintptr(unsafe.Pointer(&off)), uintptr(unsafe.Pointer(&n)), 0); e != 0 {
		return os.NewSyscallError("getsockopt XDP_MMAP_OFFSETS", e)
	}
	if n < uint32(unsafe.Sizeof(off)) {
		return absent("the ring offsets have no flags word (%d bytes, want %d)", n, unsafe.Sizeof(off))
	}
	return nil
}

// xdpSocket opens an unbound AF_XDP socket; a kernel without AF_XDP is a
// conclusive answer.
func xdpSocket() (int, error) {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if errors.Is(err, unix.EAFNOSUPPORT) {
		return -1, absent("no AF_XDP sockets (Linux 4.18, CONFIG_XDP_SOCKETS): %w", os.NewSyscallError("socket", err))
	}
	if err != nil {
		return -1, os.NewSyscallError("socket AF_XDP", err)
	}
	return fd, nil
}

// Native XDP, per driver.

// netdev family's xdp-features bits (include/uapi/linux/netdev.h,
// enum netdev_xdp_act): what a driver's native XDP can do.
const (
	netdevXDPActBasic    = 1 << 0 // XDP_PASS, XDP_DROP, XDP_ABORTED
	netdevXDPActRedirect = 1 << 1 // XDP_REDIRECT, which AF_XDP needs
)

// perDeviceXDP are the drivers whose native XDP depends on the device's
// configuration, not the driver alone: their answer is not cached per
// driver (drivers/net/veth.c veth_set_xdp_features: the peer's TX queues
// must not outnumber this end's RX queues; drivers/net/bonding
// bond_xdp_set_features: every slave must have it).
var perDeviceXDP = map[string]string{
	"veth": "a veth has native XDP only while this end has at least as many RX queues as its peer has TX queues: recreate the pair with equal counts (ip link add A numrxqueues N numtxqueues N type veth peer B numrxqueues N numtxqueues N), or use generic XDP",
	"bond": "a bond has native XDP only when all its slaves have it; use generic XDP",
}

var nativeXDP = struct {
	sync.Mutex
	byDriver map[string]*featureTest // bounded by the kernel's drivers
}{byDriver: make(map[string]*featureTest)}

// HaveNativeXDP reports whether ifname's driver runs XDP programs that
// redirect to AF_XDP sockets in the driver (native XDP), as the driver
// declares it to the netdev netlink family (xdp-features, Linux 6.3), after
// cilium/ebpf's probes for XDP programs and XSKMAP maps in the kernel. The
// answer is cached per driver, except for veth and bond, whose answer
// depends on the device. On kernels before 6.3 the driver cannot be asked:
// the error is inconclusive and Open tries native XDP. ifname must be in
// the calling thread's network namespace.
func HaveNativeXDP(ifname string) error {
	if err := kernelXDP(); err != nil {
		return err
	}
	driver := driverName(ifname)
	if fix, ok := perDeviceXDP[driver]; ok {
		t := &featureTest{name: fmt.Sprintf("native XDP on %s (driver %q)", ifname, driver), fix: fix, fn: func() error { return probeNativeXDP(ifname) }}
		return t.run()
	}
	nativeXDP.Lock()
	t := nativeXDP.byDriver[driver]
	if t == nil {
		t = &featureTest{
			name: fmt.Sprintf("native XDP with redirect in driver %q", driver),
			fix:  "use generic XDP (AttachGeneric, XDPMode = generic), or a NIC whose driver has native XDP",
			fn:   func() error { return probeNativeXDP(ifname) },
		}
		if driver != "" {
			nativeXDP.byDriver[driver] = t
		}
	}
	nativeXDP.Unlock()
	return t.run()
}

// kernelXDP: the kernel's XDP programs (Linux 4.8) and XSKMAP (4.18),
// through cilium/ebpf's own probes.
var kernelXDP = (&featureTest{
	name:      "XDP programs and XSKMAP maps",
	minKernel: "4.18",
	fix:       "upgrade the kernel (CONFIG_BPF_SYSCALL, CONFIG_XDP_SOCKETS)",
	fn: func() error {
		if err := features.HaveProgramType(ebpf.XDP); err != nil {
			return err
		}
		return features.HaveMapType(ebpf.XSKMap)
	},
}).run

// probeNativeXDP reads ifname's xdp-features.
func probeNativeXDP(ifname string) error {
	idx, err := ifindex(ifname)
	if err != nil {
		return err
	}
	attrs, err := netdevDevGet(idx)
	if err != nil {
		return err
	}
	v, ok := attrs[netdevADevXDPFeatures]
	if !ok {
		return errors.New("netdev dev-get: no xdp-features")
	}
	const want = netdevXDPActBasic | netdevXDPActRedirect
	if v&want != want {
		return absent("the driver declares xdp-features %#x, without basic actions and redirect (%#x)", v, want)
	}
	return nil
}

func ifindex(ifname string) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(ifname)
	if err != nil {
		return 0, err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); err != nil {
		return 0, fmt.Errorf("%s: %w", ifname, os.NewSyscallError("ioctl SIOCGIFINDEX", err))
	}
	return int(ifr.Uint32()), nil
}

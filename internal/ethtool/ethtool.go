//go:build linux

// Package ethtool reads and changes a network device's features (the
// offloads `ethtool -k` lists) through the SIOCETHTOOL ioctl
// (include/uapi/linux/ethtool.h: ETHTOOL_GSSET_INFO, ETHTOOL_GSTRINGS,
// ETHTOOL_GFEATURES, ETHTOOL_SFEATURES; ETHTOOL_GTXCSUM and
// ETHTOOL_STXCSUM for TX checksum offload as a whole), so that wgpio needs
// no ethtool binary. Features are named as the kernel names them
// (net/ethtool/common.c, netdev_features_strings), e.g. "rx-vlan-hw-parse".
//
// A Handle acts on the devices of the network namespace it was opened in;
// the package-level functions on those of the calling thread's.
package ethtool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ioctl commands and the features string set.
const (
	cmdGStrings  = 0x1b
	cmdGSSetInfo = 0x37
	cmdGFeatures = 0x3a
	cmdSFeatures = 0x3b
	ssFeatures   = 4  // ETH_SS_FEATURES
	stringLen    = 32 // ETH_GSTRING_LEN
	blocks       = 4  // feature words asked for: 128 features
)

// ErrNoFeature: the device (or kernel) has no feature of that name.
var ErrNoFeature = errors.New("ethtool: no such feature")

// Feature is one device feature's state.
type Feature struct {
	Name string
	// Available: the feature can be changed (in the device's hw_features).
	Available bool
	// Active: the feature is on now.
	Active bool
}

// Handle is a socket for ethtool requests, bound to the network namespace
// of the thread that opened it: requests through it reach that namespace's
// devices from any thread. Safe for concurrent use; Close it when done.
type Handle struct{ fd int }

// Open returns a Handle for the calling thread's network namespace.
func Open() (*Handle, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	return &Handle{fd: fd}, nil
}

// Close closes the socket.
func (h *Handle) Close() error { return unix.Close(h.fd) }

// Get opens a Handle, calls Handle.Get and closes it.
func Get(ifname string, names ...string) ([]Feature, error) {
	h, err := Open()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	return h.Get(ifname, names...)
}

// Set opens a Handle, calls Handle.Set and closes it.
func Set(ifname, name string, on bool) error {
	h, err := Open()
	if err != nil {
		return err
	}
	defer h.Close()
	return h.Set(ifname, name, on)
}

func (h *Handle) ioctl(ifname string, data unsafe.Pointer) error {
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data unsafe.Pointer
		_    [16]byte
	}
	copy(ifr.name[:], ifname)
	ifr.data = data
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(h.fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); e != 0 {
		return os.NewSyscallError("ioctl SIOCETHTOOL", e)
	}
	return nil
}

// bits returns each name's bit in the device's feature words, -1 for a
// name it does not have.
func (h *Handle) bits(ifname string, names []string) ([]int, error) {
	var info struct {
		cmd      uint32
		_        uint32
		ssetMask uint64
		count    uint32
	}
	info.cmd, info.ssetMask = cmdGSSetInfo, 1<<ssFeatures
	if err := h.ioctl(ifname, unsafe.Pointer(&info)); err != nil {
		return nil, fmt.Errorf("%s: feature names: %w", ifname, err)
	}
	n := int(info.count)
	if info.ssetMask == 0 || n == 0 || n > 32*blocks {
		return nil, fmt.Errorf("%s: feature names: %d strings", ifname, n)
	}
	buf := make([]byte, 12+n*stringLen)
	binary.NativeEndian.PutUint32(buf[0:], cmdGStrings)
	binary.NativeEndian.PutUint32(buf[4:], ssFeatures)
	binary.NativeEndian.PutUint32(buf[8:], uint32(n))
	if err := h.ioctl(ifname, unsafe.Pointer(&buf[0])); err != nil {
		return nil, fmt.Errorf("%s: feature names: %w", ifname, err)
	}
	out := make([]int, len(names))
	for i := range out {
		out[i] = -1
	}
	for j := range n {
		s := unix.ByteSliceToString(buf[12+j*stringLen : 12+(j+1)*stringLen])
		for i, name := range names {
			if s == name {
				out[i] = j
			}
		}
	}
	return out, nil
}

// block is struct ethtool_get_features_block.
type block struct{ available, requested, active, neverChanged uint32 }

// words reads the feature words and how many the kernel has
// (ETHTOOL_DEV_FEATURE_WORDS, which ETHTOOL_SFEATURES must be given).
func (h *Handle) words(ifname string) ([blocks]block, uint32, error) {
	var req struct {
		cmd, size uint32
		b         [blocks]block
	}
	req.cmd, req.size = cmdGFeatures, blocks
	if err := h.ioctl(ifname, unsafe.Pointer(&req)); err != nil {
		return req.b, 0, fmt.Errorf("%s: read features: %w", ifname, err)
	}
	if req.size > blocks {
		return req.b, 0, fmt.Errorf("%s: read features: %d words, more than %d", ifname, req.size, blocks)
	}
	return req.b, req.size, nil
}

// Get returns the state of the named features of ifname, in the order
// given. A name the device does not have is an error wrapping ErrNoFeature.
func (h *Handle) Get(ifname string, names ...string) ([]Feature, error) {
	bs, err := h.bits(ifname, names)
	if err != nil {
		return nil, err
	}
	w, _, err := h.words(ifname)
	if err != nil {
		return nil, err
	}
	out := make([]Feature, len(names))
	for i, b := range bs {
		if b < 0 {
			return nil, fmt.Errorf("%s: %w: %q", ifname, ErrNoFeature, names[i])
		}
		m := uint32(1) << (b % 32)
		out[i] = Feature{Name: names[i], Available: w[b/32].available&m != 0, Active: w[b/32].active&m != 0}
	}
	return out, nil
}

// Set turns the named feature of ifname on or off and returns an error if the device
// refuses or the feature is not in the state asked for afterwards (the
// driver may keep a feature on that another depends on).
func (h *Handle) Set(ifname, name string, on bool) error {
	bs, err := h.bits(ifname, []string{name})
	if err != nil {
		return err
	}
	b := bs[0]
	if b < 0 {
		return fmt.Errorf("%s: %w: %q", ifname, ErrNoFeature, name)
	}
	_, size, err := h.words(ifname)
	if err != nil {
		return err
	}
	if b/32 >= int(size) {
		return fmt.Errorf("%s: feature %q (bit %d) past the kernel's %d feature words", ifname, name, b, size)
	}
	var req struct {
		cmd, size uint32
		b         [blocks]struct{ valid, requested uint32 }
	}
	req.cmd, req.size = cmdSFeatures, size
	m := uint32(1) << (b % 32)
	req.b[b/32].valid = m
	if on {
		req.b[b/32].requested = m
	}
	if err := h.ioctl(ifname, unsafe.Pointer(&req)); err != nil {
		return fmt.Errorf("%s: set %s: %w", ifname, name, err)
	}
	w, _, err := h.words(ifname)
	if err != nil {
		return err
	}
	if (w[b/32].active&m != 0) != on {
		return fmt.Errorf("%s: set %s %v: the device keeps it %v", ifname, name, onOff(on), onOff(!on))
	}
	return nil
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// ethtoolValue is struct ethtool_value: a command and one 32-bit value.
type ethtoolValue struct{ cmd, data uint32 }

// TXChecksum reports whether TX checksum offload is on for ifname
// (ETHTOOL_GTXCSUM: any tx-checksum-* feature active).
func (h *Handle) TXChecksum(ifname string) (bool, error) {
	v := ethtoolValue{cmd: unix.ETHTOOL_GTXCSUM}
	if err := h.ioctl(ifname, unsafe.Pointer(&v)); err != nil {
		return false, fmt.Errorf("ethtool: %s: get TX checksumming: %w", ifname, err)
	}
	return v.data != 0, nil
}

// SetTXChecksum turns TX checksum offload of ifname on or off: every
// tx-checksum-* feature at once, as `ethtool -K ifname tx off` does
// (ETHTOOL_STXCSUM).
func (h *Handle) SetTXChecksum(ifname string, on bool) error {
	v := ethtoolValue{cmd: unix.ETHTOOL_STXCSUM}
	if on {
		v.data = 1
	}
	if err := h.ioctl(ifname, unsafe.Pointer(&v)); err != nil {
		return fmt.Errorf("ethtool: %s: set TX checksumming %s: %w", ifname, onOff(on), err)
	}
	return nil
}

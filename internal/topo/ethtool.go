package topo

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtoolValue is the kernel's struct ethtool_value (include/uapi/linux/
// ethtool.h): a command and one 32-bit value.
type ethtoolValue struct {
	cmd  uint32
	data uint32
}

// ifreqData is struct ifreq with ifr_data, a pointer, in its union: the
// 16-byte interface name then the 24-byte union (40 bytes on 64-bit).
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// ethtool runs one SIOCETHTOOL command carrying an ethtool_value on dev in
// the calling thread's network namespace and returns the value the kernel
// left in it.
func ethtool(dev string, cmd, data uint32) (uint32, error) {
	if len(dev) >= unix.IFNAMSIZ {
		return 0, fmt.Errorf("interface name %q longer than %d bytes", dev, unix.IFNAMSIZ-1)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	v := ethtoolValue{cmd: cmd, data: data}
	var ifr ifreqData
	copy(ifr.name[:], dev)
	ifr.data = unsafe.Pointer(&v)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(&v)
	if errno != 0 {
		return 0, os.NewSyscallError("ioctl SIOCETHTOOL", errno)
	}
	return v.data, nil
}

// SetTXChecksum turns TX checksum offload of dev (in the namespace) on or
// off through the kernel's ethtool ioctl (ETHTOOL_STXCSUM: every
// tx-checksum-* feature, as `ethtool -K dev tx off` does), without the
// ethtool binary.
func (n *NS) SetTXChecksum(dev string, on bool) error {
	var v uint32
	if on {
		v = 1
	}
	err := n.Do(func() error {
		_, err := ethtool(dev, unix.ETHTOOL_STXCSUM, v)
		return err
	})
	if err != nil {
		return fmt.Errorf("set TX checksum offload of %s in %s: %w", dev, n.Name, err)
	}
	return nil
}

// TXChecksum reports whether TX checksum offload is on for dev in the
// namespace (ETHTOOL_GTXCSUM).
func (n *NS) TXChecksum(dev string) (on bool, err error) {
	err = n.Do(func() error {
		v, err := ethtool(dev, unix.ETHTOOL_GTXCSUM, 0)
		on = v != 0
		return err
	})
	if err != nil {
		return false, fmt.Errorf("read TX checksum offload of %s in %s: %w", dev, n.Name, err)
	}
	return on, nil
}

//go:build linux

package afxdp

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtoolChannels is struct ethtool_channels (include/uapi/linux/ethtool.h).
type ethtoolChannels struct {
	Cmd                                         uint32
	MaxRX, MaxTX, MaxOther, MaxCombined         uint32
	RXCount, TXCount, OtherCount, CombinedCount uint32
}

// ethtoolGChannels is ETHTOOL_GCHANNELS.
const ethtoolGChannels = 0x3c

// rxQueues returns the number of RX queues in use on ifname (the RX plus
// combined channels of ETHTOOL_GCHANNELS: the kernel's real_num_rx_queues,
// which AF_XDP binds check), or 0 if the driver does not say.
func rxQueues(ifname string) int {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer unix.Close(fd)
	ch := ethtoolChannels{Cmd: ethtoolGChannels}
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data unsafe.Pointer
		_    [16]byte
	}
	copy(ifr.name[:], ifname)
	ifr.data = unsafe.Pointer(&ch)
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	if e != 0 {
		return 0
	}
	return int(ch.RXCount + ch.CombinedCount)
}

// DeviceQueues returns the number of RX queues in use on ifname (in the
// caller's network namespace), or 0 if the driver does not say. Frames that
// arrive on a queue without a socket go to the kernel (counted as
// "xdp_pass_no_socket"), so a caller that opens fewer queues than this
// leaves part of the traffic to the kernel.
func DeviceQueues(ifname string) int { return rxQueues(ifname) }

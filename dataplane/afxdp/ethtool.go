//go:build linux

package afxdp

import "github.com/safchain/ethtool"

// rxQueues returns the number of RX queues in use on ifname (the RX plus
// combined channels of ETHTOOL_GCHANNELS: the kernel's real_num_rx_queues,
// which AF_XDP binds check), or 0 if the driver does not say.
func rxQueues(ifname string) int {
	e, err := ethtool.NewEthtool()
	if err != nil {
		return 0
	}
	defer e.Close()
	ch, err := e.GetChannels(ifname)
	if err != nil {
		return 0
	}
	return int(ch.RxCount + ch.CombinedCount)
}

// DeviceQueues returns the number of RX queues in use on ifname (in the
// caller's network namespace), or 0 if the driver does not say. Frames that
// arrive on a queue without a socket go to the kernel (counted as
// "xdp_pass_no_socket"), so a caller that opens fewer queues than this
// leaves part of the traffic to the kernel.
func DeviceQueues(ifname string) int { return rxQueues(ifname) }

//go:build linux

package afxdp

import "golang.org/x/sys/unix"

// Kernel ABI constants (include/uapi/linux/if_xdp.h, bpf.h).
const (
	xdpRingNeedWakeup = unix.XDP_RING_NEED_WAKEUP

	// xdpPacketHeadroom is the headroom the kernel leaves in front of
	// received data inside a chunk (XDP_PACKET_HEADROOM).
	xdpPacketHeadroom = unix.XDP_PACKET_HEADROOM

	// copyModeTXBudget is how many frames the kernel sends per sendto in
	// copy mode unless XDP_MAX_TX_SKB_BUDGET (Linux 6.17) raises it
	// (net/xdp/xsk.c, MAX_PER_SOCKET_BUDGET).
	copyModeTXBudget = 32

	// XDP actions (enum xdp_action).
	xdpDrop     = 1
	xdpPass     = 2
	xdpRedirect = 4
)

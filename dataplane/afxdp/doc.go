// Package afxdp is the AF_XDP backend of dataplane: one AF_XDP socket per
// NIC queue (Documentation/networking/af_xdp.rst in the Linux tree;
// include/uapi/linux/if_xdp.h for the ABI), rings mapped with
// golang.org/x/sys/unix, and an XDP program assembled with
// github.com/cilium/ebpf/asm (no C toolchain at build or run time).
//
// The program redirects what Filter selects to the socket of the frame's
// RX queue through an XSKMAP, and passes everything else to the kernel
// (XDP_PASS): UDP to given addresses and port ranges (WAN side), ARP
// (RFC 826) and NDP (RFC 4861) for owned addresses, and unicast frames to
// the port's MAC whose destination lies in an LPM-trie of prefixes (LAN
// side). It counts what it redirects and passes in per-CPU counters, read
// by Port.Stats beside the sockets' XDP_STATISTICS. It is attached through
// a bpf_link (Linux 5.9), so a process that dies leaves nothing attached;
// native (driver) XDP where the driver has it (HaveNativeXDP), generic XDP
// otherwise.
//
// Frames live in a UMEM, handed out through a dataplane.Pool whose chunk
// offsets are UMEM addresses, so a Frame indexes the UMEM directly. Ports
// opened on one UMEM (Config.UMEM) share it with XDP_SHARED_UMEM (separate
// fill and completion rings per socket, Linux 5.10), so a frame moves from
// one port's RX to another's TX without a copy; where the kernel cannot
// (HaveSharedUMEM) or refuses, the port falls back to its own UMEM and
// Transmit copies and counts. A UMEM runs in copy mode (every driver, veth
// included) or zero-copy mode (drivers that offer it), never both;
// need_wakeup is on where the kernel has it (HaveNeedWakeup).
//
// What the kernel and the driver offer is probed once and cached, in the
// manner of cilium/ebpf's features package (features.go); a missing
// feature is a *FeatureError, which matches dataplane.ErrNotSupported and
// names the feature, the running kernel and the fix.
//
// Requirements: Linux 5.10 or later (6.17 for one sendto per TX burst in
// copy mode), root or CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF. Open must run
// in the interface's network namespace. On other systems the package holds
// Filter, UDPMatch and their limits (filter.go), so that code describing a
// filter (bind.XDPFilter) builds there, and an Open that returns "not
// implemented" (afxdp_other.go).
package afxdp

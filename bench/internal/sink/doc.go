// Package sink is the bench rig's receiving end: a UDP reader that counts
// the generator's packets (package gen) per flow and sequence number, so that
// loss and reordering are measured where the traffic ends, and a TCP pair
// (one stream) that measures throughput, retransmissions and reordering
// from the sender's TCP_INFO (tcp(7); struct tcp_info in
// include/uapi/linux/tcp.h: tcpi_total_retrans, tcpi_reord_seen).
//
// The UDP reader uses recvmmsg(2) through golang.org/x/net/ipv4's ReadBatch
// and a large receive buffer; the kernel's own count of datagrams dropped
// for lack of buffer space (RcvbufErrors in /proc/net/snmp, read with
// ParseSNMP) shows whether the sink kept up.
//
// Linux only (TCP_INFO, SO_RCVBUFFORCE, /proc/net/snmp): on other systems
// the package holds this documentation alone, so that `go build ./...`
// passes there (README, "Portability").
package sink

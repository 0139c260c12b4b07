package gateway

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// uapiMaxSendBuffer bounds the socket send buffer a get reply asks for
// (growSendBuffer): 8 MiB holds the reply of about 20,000 peers. At most
// uapiMaxConns connections hold one, and only while their reader (root:
// the socket is 0600) leaves the reply unread.
const uapiMaxSendBuffer = 8 << 20

// growSendBuffer raises conn's socket send buffer (SO_SNDBUFFORCE, or
// SO_SNDBUF up to net.core.wmem_max without CAP_NET_ADMIN) so that a reply
// of n bytes, up to uapiMaxSendBuffer, is queued by one write. With the
// default buffer (about 200 KB) a 10,000-peer reply (3.5 MB) took some 17
// writes, each waiting for the reader to drain the socket and then for the
// writing goroutine to be scheduled again: during a handshake storm, with
// every CPU busy, a `wg show` took 100–350 ms, most of it in those waits
// (bench/scale's storm). Failures are ignored: the write then just takes
// more turns.
func growSendBuffer(conn net.Conn, n int) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	n = min(n, uapiMaxSendBuffer)
	rc.Control(func(fd uintptr) {
		// The kernel reports twice what was set (the other half is its
		// bookkeeping), so a buffer already at n or more is left alone.
		if cur, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF); err == nil && cur >= 2*n {
			return
		}
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, n) != nil {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, n)
		}
	})
}

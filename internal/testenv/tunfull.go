//go:build linux

package testenv

import (
	"math"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/internal/topo"
)

// FillTUN makes the kernel refuse every write to the TUN interface tun in
// ns as it refuses one to a full queue, with EAGAIN, until the returned
// function (also run at the end of t) undoes it. q is one of the TUN's
// queue files (TUNSETSNDBUF sets the send buffer of every queue).
//
// The kernel takes a TUN write while the packets it holds, still charged
// to the queue's socket, are below the socket's send buffer
// (sock_alloc_send_pskb, from tun_get_user, drivers/net/tun.c), and
// refuses it with EAGAIN otherwise, on a non-blocking file. FillTUN sets
// the send buffer to 1 byte and has the kernel hold every written packet
// in a qdisc that sends 8 bits a second: a u32 filter at the TUN's
// ingress redirects each (mirred, without a copy, so the socket stays
// charged) to the egress of veth, a spare interface in ns, under a tbf
// qdisc. The first packet or two go out in tbf's burst; from the first
// one held on, the queue stays full. Needs tc (iproute2) and the kernel's
// NET_SCH_TBF, NET_SCH_INGRESS, NET_CLS_U32, NET_ACT_MIRRED.
func FillTUN(t testing.TB, ns *topo.NS, tun, veth string, q *os.File) (empty func()) {
	t.Helper()
	Tool(t, "tc", "iproute2")
	tc := func(args ...string) {
		t.Helper()
		if out, err := ns.Run("tc", args...); err != nil {
			t.Fatalf("tc %v in %s: %v\n%s", args, ns.Name, err, out)
		}
	}
	tc("qdisc", "add", "dev", veth, "root", "tbf", "rate", "8bit", "burst", "1600", "limit", "10000000")
	tc("qdisc", "add", "dev", tun, "ingress")
	tc("filter", "add", "dev", tun, "ingress", "protocol", "all", "u32", "match", "u32", "0", "0",
		"action", "mirred", "egress", "redirect", "dev", veth)
	SetTUNSendBuffer(t, q, 1)
	done := false
	empty = func() {
		if done {
			return
		}
		done = true
		tc("qdisc", "del", "dev", tun, "ingress")
		tc("qdisc", "del", "dev", veth, "root")
		SetTUNSendBuffer(t, q, math.MaxInt32) // the kernel's default (tun_chr_open)
	}
	t.Cleanup(empty)
	return empty
}

// SetTUNSendBuffer sets the send buffer of every queue of the TUN whose
// queue file q is to bytes (TUNSETSNDBUF), without making q blocking
// (os.File.Fd would).
func SetTUNSendBuffer(t testing.TB, q *os.File, bytes int) {
	t.Helper()
	rc, err := q.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetPointerInt(int(fd), unix.TUNSETSNDBUF, bytes)
	}); err != nil {
		t.Fatal(err)
	}
	if ierr != nil {
		t.Fatalf("TUNSETSNDBUF %d: %v", bytes, ierr)
	}
}

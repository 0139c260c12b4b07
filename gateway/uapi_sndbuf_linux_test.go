package gateway

import (
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/internal/testenv"
)

// TestGrowSendBuffer: after growSendBuffer(n) one write of an n-byte reply
// to a UNIX stream socket completes with nobody reading (with the default
// buffer it blocks until the reader drains it, which during a handshake
// storm costs a `wg show` a scheduling wait per buffer-full).
func TestGrowSendBuffer(t *testing.T) {
	testenv.Root(t) // SO_SNDBUFFORCE needs CAP_NET_ADMIN
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "uapi")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	w, _ := conn(fds[0]), conn(fds[1])
	const n = 4 << 20 // about 11,000 peers' reply
	reply := make([]byte, n)
	// Without the grown buffer the write cannot complete: the check can fail.
	w.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	if k, err := w.Write(reply[:n/2]); err == nil {
		t.Fatalf("a %d-byte write completed with the default send buffer (%d written): the test proves nothing", n/2, k)
	}
	// What the timed-out write queued stays queued: a fresh pair.
	fds, err = unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	w, _ = conn(fds[0]), conn(fds[1])
	growSendBuffer(w, n)
	w.SetWriteDeadline(time.Now().Add(10 * time.Second)) // ends a broken test only
	if k, err := w.Write(reply); err != nil {
		t.Fatalf("write of a %d-byte reply with nobody reading: %d written, %v", n, k, err)
	}
	// Bounded: a larger request is cut to uapiMaxSendBuffer.
	growSendBuffer(w, 1<<30)
	rc, err := w.(*net.UnixConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	rc.Control(func(fd uintptr) { got, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF) })
	if got > 2*uapiMaxSendBuffer {
		t.Errorf("SO_SNDBUF = %d after asking for 1 GiB, want at most %d", got, 2*uapiMaxSendBuffer)
	}
}

// TestReplyBufs: a get's buffer is reused by the next get (no fresh pages
// to fault in), at most two are kept, and they go after replyIdle without
// a get.
func TestReplyBufs(t *testing.T) {
	var r replyBufs
	t0 := time.Unix(1000, 0)
	a := r.get(1<<20, t0)
	if cap(a) < 1<<20 || len(a) != 0 {
		t.Fatalf("get: len %d cap %d", len(a), cap(a))
	}
	a = append(a, "private_key=..."...)
	clear(a)
	r.put(a)
	b := r.get(1<<20, t0.Add(time.Second))
	if &b[:1][0] != &a[:1][0] {
		t.Error("the second get did not reuse the first get's buffer")
	}
	c, d := r.get(10, t0.Add(time.Second)), r.get(10, t0.Add(time.Second))
	r.put(b)
	r.put(c)
	r.put(d)
	if len(r.free) != 2 {
		t.Errorf("kept %d buffers, want 2", len(r.free))
	}
	r.expire(t0.Add(time.Second + replyIdle - time.Millisecond))
	if len(r.free) != 2 {
		t.Errorf("expired %d buffers before replyIdle", 2-len(r.free))
	}
	r.expire(t0.Add(time.Second + replyIdle))
	if len(r.free) != 0 {
		t.Errorf("kept %d buffers after replyIdle without a get", len(r.free))
	}
}

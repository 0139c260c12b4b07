package wakefd

import (
	"testing"

	"golang.org/x/sys/unix"
)

// readable polls r without blocking.
func readable(t *testing.T, r int) bool {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(r), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		return n == 1 && fds[0].Revents&unix.POLLIN != 0
	}
}

// TestSignalDrain: a new pair is unreadable; one Signal or many make it
// readable (many: more than a pipe drains in one read, and past a full 64 KiB
// pipe, where Signal must not block); Drain makes it unreadable again,
// and a Drain of an unreadable pair does not block.
func TestSignalDrain(t *testing.T) {
	r, w, err := New()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if readable(t, r) {
		t.Fatal("a new pair is readable")
	}
	Drain(r)
	for _, n := range []int{1, 2, 300, 70_000} {
		for range n {
			Signal(w)
		}
		if !readable(t, r) {
			t.Fatalf("after %d Signals: not readable", n)
		}
		Drain(r)
		if readable(t, r) {
			t.Fatalf("after %d Signals and a Drain: still readable", n)
		}
	}
	if err := Close(r, w); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := unix.Close(r); err != unix.EBADF {
		t.Errorf("close(r) after Close = %v, want EBADF", err)
	}
	if err := unix.Close(w); err != unix.EBADF {
		t.Errorf("close(w) after Close = %v, want EBADF", err)
	}
}

// TestCloseOnExec: neither end leaks into a program this one starts.
func TestCloseOnExec(t *testing.T) {
	r, w, err := New()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer Close(r, w)
	for _, fd := range []int{r, w} {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil {
			t.Fatalf("fcntl(%d, F_GETFD): %v", fd, err)
		}
		if flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("fd %d: FD_CLOEXEC not set", fd)
		}
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err != nil {
			t.Fatalf("fcntl(%d, F_GETFL): %v", fd, err)
		}
		if fl&unix.O_NONBLOCK == 0 {
			t.Errorf("fd %d: O_NONBLOCK not set", fd)
		}
	}
}

//go:build linux && !wgpio_wakepipe

package wakefd

import (
	"os"

	"golang.org/x/sys/unix"
)

// New returns a descriptor pair, unreadable: r polls readable after a
// Signal on w and until a Drain of r. Here r == w, one eventfd(2)
// (non-blocking, close-on-exec); Close closes it once.
func New() (r, w int, err error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return -1, -1, os.NewSyscallError("eventfd", err)
	}
	return fd, fd, nil
}

// Signal makes r readable. It fails only when the eventfd's counter would
// overflow (EAGAIN), in which case r is readable already.
func Signal(w int) {
	one := [8]byte{1}
	_, _ = unix.Write(w, one[:])
}

// Drain makes r unreadable until the next Signal: one read resets the
// eventfd's counter.
func Drain(r int) {
	var buf [8]byte
	_, _ = unix.Read(r, buf[:])
}

// Close closes the pair (once: r == w).
func Close(r, w int) error {
	if err := unix.Close(w); err != nil {
		return os.NewSyscallError("close", err)
	}
	return nil
}

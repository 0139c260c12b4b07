//go:build !linux || wgpio_wakepipe

package wakefd

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// New returns a descriptor pair, unreadable: r polls readable after a
// Signal on w and until a Drain of r. Here the ends of a pipe(2), both
// non-blocking and close-on-exec (set under syscall.ForkLock, as package
// os does where pipe2 is missing, so that no child started meanwhile
// inherits them).
func New() (r, w int, err error) {
	var p [2]int
	syscall.ForkLock.RLock()
	err = unix.Pipe(p[:])
	if err == nil {
		unix.CloseOnExec(p[0])
		unix.CloseOnExec(p[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return -1, -1, os.NewSyscallError("pipe", err)
	}
	for _, fd := range p {
		if err := unix.SetNonblock(fd, true); err != nil {
			unix.Close(p[0])
			unix.Close(p[1])
			return -1, -1, os.NewSyscallError("fcntl", err)
		}
	}
	return p[0], p[1], nil
}

// Signal makes r readable: one byte into the pipe. It fails only when the
// pipe is full (EAGAIN), in which case r is readable already.
func Signal(w int) {
	one := [1]byte{1}
	_, _ = unix.Write(w, one[:])
}

// Drain makes r unreadable until the next Signal: it reads the pipe until
// it is empty (each Signal since the last Drain left a byte).
func Drain(r int) {
	var buf [256]byte
	for {
		n, err := unix.Read(r, buf[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil || n < len(buf) {
			return
		}
	}
}

// Close closes both ends; the first error is returned.
func Close(r, w int) error {
	errR, errW := unix.Close(r), unix.Close(w)
	if errR != nil {
		return os.NewSyscallError("close", errR)
	}
	if errW != nil {
		return os.NewSyscallError("close", errW)
	}
	return nil
}

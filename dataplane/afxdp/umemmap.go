//go:build linux

package afxdp

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/wgpio/wgpio/dataplane"
)

// mapMemory returns size bytes of zeroed memory mapped outside the Go heap
// (mmap(2), anonymous and private), aligned as dataplane.AllocMemory
// aligns: from 8 MiB on to dataplane.HugePageSize, and advised as huge-page
// memory. mapping is the whole mapping, for unmapMemory.
func mapMemory(size int) (mem, mapping []byte, err error) {
	align := unix.Getpagesize()
	if size >= 4*dataplane.HugePageSize {
		align = dataplane.HugePageSize
	}
	mapping, err = unix.Mmap(-1, 0, size+align, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil, fmt.Errorf("afxdp: map %d bytes of frame memory: %w", size, err)
	}
	off := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(mapping))) % uintptr(align)); r != 0 {
		off = align - r
	}
	mem = mapping[off : off+size : off+size]
	if align == dataplane.HugePageSize {
		dataplane.AdviseHugePages(mem)
	}
	return mem, mapping, nil
}

// ErrUMEMInUse: Free was called on a UMEM a socket still uses.
var ErrUMEMInUse = errors.New("afxdp: UMEM in use by an open port")

// errUMEMFreed: a port was opened on a UMEM after Free.
var errUMEMFreed = errors.New("afxdp: UMEM freed")

// Free unmaps a UMEM made with UMEMConfig.Mapped, once every port on it is
// closed (else ErrUMEMInUse); no frame of its pool may be used after. A
// UMEM of Go heap memory is left to the garbage collector: Free does
// nothing. Safe to call more than once.
func (u *UMEM) Free() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.mapping == nil {
		return nil
	}
	if len(u.live) > 0 {
		return ErrUMEMInUse
	}
	err := unix.Munmap(u.mapping)
	u.mapping, u.mem = nil, nil
	return err
}

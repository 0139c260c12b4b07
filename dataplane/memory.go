package dataplane

import (
	"os"
	"unsafe"
)

// HugePageSize is the size of a transparent huge page on x86-64 and arm64
// with 4 KiB base pages, in bytes.
const HugePageSize = 2 << 20

// hugeMin is the smallest memory AllocMemory aligns to HugePageSize: below
// it the alignment slack would be a large share of the memory.
const hugeMin = 4 * HugePageSize

// AllocMemory returns size bytes of zeroed memory (Go heap, garbage
// collected once unreferenced) for a frame pool: aligned to the page, and
// from 8 MiB on aligned to HugePageSize and advised as huge-page memory
// (AdviseHugePages). A pool's frames are spread over its memory and every
// queue touches them in turn, so with 4 KiB pages almost every frame
// access misses the TLB (a two-level page walk in a virtual machine);
// 2 MiB pages cover a 128 MiB pool with 64 TLB entries. It costs at most
// one huge page of slack.
func AllocMemory(size int) []byte {
	align := os.Getpagesize()
	if size >= hugeMin {
		align = HugePageSize
	}
	raw := make([]byte, size+align)
	off := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(raw))) % uintptr(align)); r != 0 {
		off = align - r
	}
	mem := raw[off : off+size : off+size]
	if size >= hugeMin {
		AdviseHugePages(mem)
	}
	return mem
}

// AdviseHugePages asks the kernel to back the HugePageSize-aligned part of
// b with transparent huge pages (madvise(2) MADV_HUGEPAGE), which it does
// when transparent_hugepage is "always" or "madvise" and as it faults the
// pages in (touch them after this call). Best effort: a kernel without
// transparent huge pages or an error changes nothing, and b works either
// way. Linux only: elsewhere it does nothing (there is no such advice;
// FreeBSD promotes aligned memory to superpages by itself where
// vm.pmap.pg_ps_enabled is on, its default on amd64).
func AdviseHugePages(b []byte) {
	if len(b) == 0 {
		return
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	start := (p + HugePageSize - 1) &^ (HugePageSize - 1)
	end := (p + uintptr(len(b))) &^ (HugePageSize - 1)
	if end <= start {
		return
	}
	adviseHuge(b[start-p : end-p])
}

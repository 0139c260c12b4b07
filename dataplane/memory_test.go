package dataplane

import (
	"os"
	"testing"
	"unsafe"
)

// TestAllocMemory checks the length, the alignment (the page below 8 MiB,
// HugePageSize from there) and that the memory is zeroed and writable
// after the huge-page advice.
func TestAllocMemory(t *testing.T) {
	for _, c := range []struct{ size, align int }{
		{4096, os.Getpagesize()},
		{3*HugePageSize + 123, os.Getpagesize()},
		{hugeMin, HugePageSize},
		{5*HugePageSize + 4096, HugePageSize},
	} {
		m := AllocMemory(c.size)
		if len(m) != c.size || cap(m) != c.size {
			t.Fatalf("AllocMemory(%d): len %d cap %d", c.size, len(m), cap(m))
		}
		if p := uintptr(unsafe.Pointer(unsafe.SliceData(m))); p%uintptr(c.align) != 0 {
			t.Fatalf("AllocMemory(%d) at %#x, not aligned to %d", c.size, p, c.align)
		}
		for i := 0; i < len(m); i += 4096 {
			if m[i] != 0 {
				t.Fatalf("AllocMemory(%d): byte %d is %d", c.size, i, m[i])
			}
			m[i] = 1
		}
	}
	// Advice on memory shorter than a huge page, or unaligned, is a no-op.
	AdviseHugePages(nil)
	AdviseHugePages(make([]byte, 100))
	AdviseHugePages(AllocMemory(hugeMin)[1:])
}

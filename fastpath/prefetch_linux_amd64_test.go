package fastpath

import (
	"bufio"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// TestVendor: the vendor string cpuVendor reads with CPUID, which picks
// the outbound look-ahead's prefetch (aheadToL1), is the kernel's
// vendor_id.
func TestVendor(t *testing.T) {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if ok && strings.TrimSpace(k) == "vendor_id" {
			if got, want := vendor(), strings.TrimSpace(v); got != want {
				t.Fatalf("vendor() = %q, /proc/cpuinfo vendor_id %q", got, want)
			}
			if aheadToL1 != (vendor() == "AuthenticAMD") {
				t.Errorf("aheadToL1 = %v on %s", aheadToL1, vendor())
			}
			return
		}
	}
	t.Fatalf("no vendor_id in /proc/cpuinfo (%v)", s.Err())
}

// TestPrefetchAhead: both of the look-ahead's prefetches (aheadToL1 either
// way) take addresses that are 0, unmapped or real without faulting, and
// change nothing they name.
func TestPrefetchAhead(t *testing.T) {
	defer func(v bool) { aheadToL1 = v }(aheadToL1)
	buf := make([]byte, 4096)
	for i := range buf {
		buf[i] = byte(i)
	}
	lines := []uintptr{0, uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&buf[64])), 0xdead0000, uintptr(unsafe.Pointer(&buf[4095]))}
	for _, l1 := range []bool{false, true} {
		aheadToL1 = l1
		for n := range len(lines) + 1 {
			prefetchAhead(lines[:n])
		}
	}
	for i := range buf {
		if buf[i] != byte(i) {
			t.Fatalf("byte %d changed", i)
		}
	}
}

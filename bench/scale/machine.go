//go:build linux

package main

import (
	"fmt"
	"math/rand/v2"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The machine part measures what the memory part's fastpath_100k_vs_1
// depends on most: the latency of a load that misses the caches. With
// 100,000 peers and traffic spread over 10,000 of them, a burst's 64
// packets reach 64 peers whose state (route cache entry, Peer, the
// worker's peerLocal and template, the keypair: some five lines each,
// 3 MB or more for 10,000 peers, and the pump's frames beside) was last
// touched 156 bursts before; whether that fits the last-level cache this
// machine gives the process decides whether a line costs a cache hit or
// a trip to memory. A VM's share of a shared L3 is not in /proc/cpuinfo
// (nor, on these VMs, in sysfs): this part measures it.
//
// machine_load_ns_<n>kib is the time of one load in a chain of dependent
// loads (each address read from the line before) over n KiB, one load
// per 64-byte line in a random cyclic order, so that neither the
// prefetchers nor out-of-order execution hide any of it; _huge is the same
// over memory advised for transparent huge pages (MADV_HUGEPAGE), which
// shows what the page walks cost (in a VM, with the host's pages under
// the guest's, little changes past the cache).
func init() { register("machine", machinePart) }

func machinePart(e *env, out map[string]any) error {
	steps := 4_000_000
	if e.Quick {
		steps = 400_000
	}
	for _, kib := range []int{256, 512, 1024, 2048, 4096, 8192, 12288, 16384, 65536} {
		for _, huge := range []bool{false, true} {
			ns, err := chaseLatency(kib<<10, huge, steps)
			if err != nil {
				return err
			}
			key := fmt.Sprintf("machine_load_ns_%dkib", kib)
			if huge {
				key += "_huge"
			}
			out[key] = float64(int64(ns*10+0.5)) / 10
			e.Logf("machine: %d KiB, huge pages %v: %.1f ns per dependent load", kib, huge, ns)
		}
	}
	return nil
}

// chaseLatency returns the mean time in ns of one load in a chain of
// steps dependent loads over size bytes of fresh anonymous memory (huge:
// advised MADV_HUGEPAGE, else MADV_NOHUGEPAGE), one per line in a random
// cycle.
func chaseLatency(size int, huge bool, steps int) (float64, error) {
	const align = 2 << 20 // a huge page
	b, err := unix.Mmap(-1, 0, size+align, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return 0, fmt.Errorf("machine: mmap of %d bytes: %w", size+align, err)
	}
	defer unix.Munmap(b)
	off := (align - int(uintptr(unsafe.Pointer(&b[0]))%align)) % align
	m := b[off : off+size]
	advice := unix.MADV_NOHUGEPAGE
	if huge {
		advice = unix.MADV_HUGEPAGE
	}
	if err := unix.Madvise(m, advice); err != nil {
		return 0, fmt.Errorf("machine: madvise: %w", err)
	}
	// Line perm[i] holds the address of line perm[i+1].
	lines := size / 64
	perm := rand.Perm(lines)
	base := unsafe.Pointer(&m[0])
	for i, l := range perm {
		next := unsafe.Add(base, perm[(i+1)%lines]*64)
		*(*unsafe.Pointer)(unsafe.Add(base, l*64)) = next
	}
	p := unsafe.Add(base, perm[0]*64)
	for range lines { // once round, untimed: the pages are mapped
		p = *(*unsafe.Pointer)(p)
	}
	t := time.Now()
	for range steps {
		p = *(*unsafe.Pointer)(p)
	}
	ns := float64(time.Since(t).Nanoseconds()) / float64(steps)
	if p == nil {
		return 0, fmt.Errorf("machine: broken chain")
	}
	return ns, nil
}

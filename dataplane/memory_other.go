//go:build !linux

package dataplane

// adviseHuge does nothing: madvise(2) has no MADV_HUGEPAGE here
// (AdviseHugePages).
func adviseHuge([]byte) {}

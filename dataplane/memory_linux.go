package dataplane

import "golang.org/x/sys/unix"

// adviseHuge is madvise(2) MADV_HUGEPAGE on b, huge-page aligned; an error
// is ignored (AdviseHugePages).
func adviseHuge(b []byte) {
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
}

//go:build !amd64

package fastpath

import "unsafe"

// prefetch does nothing on this architecture (see prefetch_amd64.go).
func prefetch(lines []unsafe.Pointer) {}

// prefetchL2 does nothing on this architecture (see prefetch_amd64.go).
func prefetchL2(lines []unsafe.Pointer) {}

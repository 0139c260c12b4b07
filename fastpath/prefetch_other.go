//go:build !amd64

package fastpath

// prefetch does nothing on this architecture (see prefetch_amd64.go).
func prefetch(lines []uintptr) {}

// prefetchL2 does nothing on this architecture (see prefetch_amd64.go).
func prefetchL2(lines []uintptr) {}

// prefetchAhead does nothing on this architecture (see prefetch_amd64.go).
func prefetchAhead(lines []uintptr) {}

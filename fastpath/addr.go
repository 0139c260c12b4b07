package fastpath

import "unsafe"

// addrOf is the address of *p as a number, for the look-aheads' prefetch
// lists: a []uintptr holds no pointers, so that filling one takes no
// write barrier, and a list left filled after a burst keeps nothing
// reachable (a keypair the control plane zeroes, say) and needs no
// clearing. A prefetch of an address whose object was freed since loads
// a line and nothing more.
func addrOf[T any](p *T) uintptr { return uintptr(unsafe.Pointer(p)) }

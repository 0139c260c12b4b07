package fastpath

import (
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
)

// optionsError returns the error Linux answers the transit IP packet p
// with (header checked) when headerOptions drops it: "parameter problem"
// pointing at the bad octet (header.OptionsError), or false when Linux
// drops p without an answer. A rare path.
func optionsError(p []byte) (icmpError, bool) {
	code, ptr, ok := header.OptionsError(p)
	if !ok {
		return icmpError{}, false
	}
	return icmpError{kind: icmpParamProblem, code: code, ptr: ptr}, true
}

// optionsDrop answers a transit packet dropped for its options
// (DropIPOptions) as Linux does (optionsError): the packet in f from the
// LAN, its IP header at l3 (the frame is dropped: it is trimmed to the
// IP packet here).
//
//go:noinline
func (w *worker) optionsDrop(f *dataplane.Frame, l3, ipLen int, now int64) {
	f.TrimFront(l3)
	f.SetLen(ipLen)
	if e, ok := optionsError(f.Data()); ok {
		w.icmpErrorToLAN(f, l3, e, now)
	}
}

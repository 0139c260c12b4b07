package tundev

import (
	"net/netip"

	"github.com/gaissmai/bart"

	"github.com/wgpio/wgpio/header"
)

// SetAllowed makes Read drop every packet from the kernel that stock
// wireguard-go on this TUN (compat-mqtun) would drop without a counter,
// and count it: as TUNDropNoRoute one whose destination no prefix of
// allowed (the peers' allowed IPs) holds (TUNDropHostMulticast when it is
// multicast), as TUNDropMalformed one shorter
// than its IP header or neither IPv4 nor IPv6 (wireguard-go's
// RoutineReadFromTUN, device/send.go, finds no peer for such packets and
// skips them). It replaces the previous set; nil turns the check off (the
// default), and an empty non-nil allowed drops every packet. The set is
// copied into a table published whole: Read loads it once per call and
// looks each packet up in it without allocating; nothing more per packet
// while it is off. Safe for concurrent use; O(len(allowed)).
//
// The caller keeps it in step with wireguard-go's allowed IPs, setting it
// after a change is applied and before it is acknowledged, so that no
// packet to an allowed IP is dropped.
func (t *MultiQueueTUN) SetAllowed(allowed []netip.Prefix) {
	t.allowedMu.Lock()
	defer t.allowedMu.Unlock()
	if allowed == nil {
		t.allowed.Store(nil)
		return
	}
	tb := new(bart.Table[struct{}])
	for _, p := range allowed {
		tb.Insert(p.Masked(), struct{}{})
	}
	t.allowed.Store(tb)
}

// UpdateAllowed changes SetAllowed's set by a difference: the prefixes
// of del leave it, then those of add enter it (a prefix in both stays).
// Nothing changes while the check is off. The table is copied along the
// changed paths only (bart's persistent insert and delete) and published
// whole, so that a change costs O(len(add)+len(del)), not O(the set): a
// script adding thousands of peers one `wg set` at a time stays linear.
// Safe for concurrent use with Read and SetAllowed.
func (t *MultiQueueTUN) UpdateAllowed(add, del []netip.Prefix) {
	t.allowedMu.Lock()
	defer t.allowedMu.Unlock()
	tb := t.allowed.Load()
	if tb == nil {
		return
	}
	for _, p := range del {
		tb = tb.DeletePersist(p.Masked())
	}
	for _, p := range add {
		tb = tb.InsertPersist(p.Masked(), struct{}{})
	}
	t.allowed.Store(tb)
}

// notAllowed returns why SetAllowed's table a drops IP packet pkt, or
// NumTUNDropReasons when it does not.
func notAllowed(a *bart.Table[struct{}], pkt []byte) TUNDropReason {
	var dst netip.Addr
	switch {
	case len(pkt) >= header.IPv4MinLen && pkt[0]>>4 == 4:
		dst = netip.AddrFrom4([4]byte(pkt[16:20]))
	case len(pkt) >= header.IPv6Len && pkt[0]>>4 == 6:
		dst = netip.AddrFrom16([16]byte(pkt[24:40]))
	default:
		return TUNDropMalformed
	}
	if _, ok := a.Lookup(dst); !ok {
		if dst.IsMulticast() {
			return TUNDropHostMulticast
		}
		return TUNDropNoRoute
	}
	return NumTUNDropReasons
}

// Package toobig follows the path MTU toward IPv6 endpoints from ICMPv6
// "packet too big", for the senders that build their outer packets
// themselves: the fast path (gateway/fastgw: fastpath.Engine.SetPathMTU)
// and compat mode's bind (gateway/compatgw: bind.Bind.SetPathMTU), both
// kept in a pathmtu.Table.
//
// Those senders never pass the kernel's IPv6 output, so the path MTU the
// kernel learns toward an endpoint from a router's "packet too big" never
// bounded them: IPv6 routers do not fragment (RFC 8200 §5), and every outer
// packet over a smaller link on the way was lost, for good. Linux's
// WireGuard sends through the kernel's IPv6 output, which fragments at the
// learnt path MTU (ignore_df), so it loses only the packet the router
// answered. Follow reads those errors (from a raw ICMPv6 socket where the
// kernel owns the WAN address, ListenICMP; from a packet socket on the WAN
// interface where it does not, owned address mode, ListenLink) and sets
// the sender's path MTU of each endpoint they name, which then fragments
// the outer packets toward it at that MTU as the kernel would. An error is
// taken only when the packet it quotes is one of ours (Config.Ours: from
// one of the WAN addresses and the WireGuard source ports, UDP, whole or a
// first fragment) and reports an MTU from 1,280 below the WAN's and the
// endpoint's path MTU (or equal to the latter: it is then kept longer),
// as Linux's kernel takes them (RFC 8201 §4: an MTU below 1,280 is
// discarded, a path MTU never raised by an error); an endpoint's path MTU
// is forgotten Expiry after the last error that set it or reported it
// again, or sooner for a new endpoint when pathmtu.MaxEntries have one
// (the one set longest ago), as Linux expires it
// (net.ipv6.route.mtu_expires), so that a path that grew is used whole
// again. IPv4 needs none of this: the outer IPv4 header has DF clear, and
// routers fragment it.
package toobig

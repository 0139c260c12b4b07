// Package pathmtu holds the path MTUs learnt toward IPv6 endpoints from
// ICMPv6 "packet too big" (package internal/toobig reads them), for the
// senders that build their outer packets themselves and fragment them at
// that MTU: the fast path (fastpath.Engine.SetPathMTU) and compat mode's
// bind (bind.Bind.SetPathMTU). Table is set by the follower, at the rate
// of routers' errors, and read lock-free by the send path, one atomic load
// per batch.
package pathmtu

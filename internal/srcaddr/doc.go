// Package srcaddr judges whether an interface's IPv6 address, as netlink
// lists it, can be the source of what the gateways send from the WAN
// (RFC 4862 §5.4: not while tentative or after duplicate address
// detection failed; RFC 6724 §5 rule 3: a deprecated address only when
// there is no preferred one). The kernel lists an interface's newest
// address first: without this judgement an address just added (a
// renumbering) was sent from before it could be, and one that failed
// detection for ever. Routes asks the kernel which source its route
// toward an endpoint chooses (the route's src, else its source address
// selection), for the peers not heard from, as Linux's WireGuard sends
// to them.
//
// Linux only (netlink): on other systems the package holds this
// documentation alone, so that `go build ./...` passes there (README,
// "Portability").
package srcaddr

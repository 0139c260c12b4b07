// Package nlrcvbuf sizes the receive buffers of the gateway's netlink
// notification sockets (route, address and neighbour subscriptions): the
// gateway's own changes come in bursts (two routes into the exception TUN
// per peer, tens of thousands at a start or a large reload) that overrun
// the kernel's default buffer (net.core.rmem_default), and every overrun
// costs the subscriber a renewal and a listing, and a warning.
//
// Linux only (netlink): on other systems the package holds this
// documentation alone, so that `go build ./...` passes there (README,
// "Portability").
package nlrcvbuf

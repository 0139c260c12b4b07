// Package linkfollow follows network interfaces through a netlink link
// subscription (vishvananda/netlink): their attributes, read anew at each
// update, handed to a function on one goroutine, with the subscription
// renewed when it ends on an error. Both modes' gateways follow their
// interfaces' MTUs (and fastgw their state) with it: gateway/fastgw the
// WAN, the LAN and the exception TUN, gateway/compatgw the LAN.
//
// Linux only (netlink): on other systems the package holds this
// documentation alone, so that `go build ./...` passes there (README,
// "Portability").
package linkfollow

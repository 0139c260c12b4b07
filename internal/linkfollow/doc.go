// Package linkfollow follows network interfaces through a netlink link
// subscription (vishvananda/netlink): their attributes, read anew at each
// update, handed to a function on one goroutine, with the subscription
// renewed when it ends on an error, and their deletion reported once
// (Config.OnGone). Both modes' gateways follow their interfaces' MTUs,
// states and deletion with it: gateway/fastgw the WAN, the LAN and the
// exception TUN, gateway/compatgw the WAN and the LAN; a deletion is the
// gateway's failure (GoneError, Failure), on which `wgpio up` stops and
// exits with status 1 for its service to restart it.
//
// Linux only (netlink): on other systems the package holds this
// documentation alone, so that `go build ./...` passes there (README,
// "Portability").
package linkfollow

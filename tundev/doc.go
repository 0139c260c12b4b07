// Package tundev provides tun.Device implementations
// (golang.zx2c4.com/wireguard/tun) for stock wireguard-go: a multi-queue
// kernel TUN (IFF_MULTI_QUEUE, one reader per queue) that spreads the
// plaintext side over CPUs without leaving the kernel's TUN driver.
//
// Linux only; see the TUN/TAP documentation in the kernel tree
// (Documentation/networking/tuntap.rst) for IFF_MULTI_QUEUE.
package tundev

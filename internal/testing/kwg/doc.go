// Package kwg boots Debian's stock Linux kernel under qemu with its
// wireguard.ko (the kernel's WireGuard, "WireGuard 1.0.0") so that tests can
// check wgpio against the real kernel implementation of the protocol
// (WireGuard whitepaper, Donenfeld, NDSS 2017; Linux net/wireguard).
//
// It is the project's copy of shared/tools/kwg (see README.md here): the
// guest recipe (build-initramfs.sh, guest/init, guest/kwg-wg-up, kwgecho)
// is that tool's, run from Go. Prepare fills a cache (kernel .deb,
// unpacked modules, initramfs); Boot starts a guest behind a tap device in
// a namespace the caller made (package topo) with wg0 configured for one
// userspace peer; Guest.Ctl runs commands in the guest over a serial
// command channel; UDPEcho and TCPEcho verify traffic byte for byte
// against the guest's echo server on port 7.
//
// The interop tests (kwg_test.go) run wgpio's fast-path gateway and stock
// wireguard-go on wgpio's bind and tundev against the guest, in both
// handshake roles. They need root, qemu-system-x86_64, /dev/net/tun and the
// tools listed at Prepare; without them they skip, or fail under
// WGPIO_REQUIRE_ALL=1.
//
// Linux only (qemu, a tap device, network namespaces): on other
// systems the package holds this documentation alone, so that `go build
// ./...` passes there (README, "Portability").
package kwg

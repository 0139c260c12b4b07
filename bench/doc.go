//go:build linux

// Command bench measures wgpio against stock wireguard-go side by side, on
// one machine, in one command: it builds four network namespaces (source
// host, gateway 1, gateway 2, sink host), runs a WireGuard tunnel between
// the gateways with each configuration in turn, sweeps offered load with an
// AF_XDP packet generator, counts loss and reordering at the sink, reads
// each gateway's CPU time and context switches, runs one inner TCP stream,
// and writes results.json, results.md (the table) and plot-<size>.png into
// a results folder. See package bench/internal/rig for the method.
//
// Usage, as root, from the repository root:
//
//	go run ./bench -quick            # under 2 minutes
//	go run ./bench                   # the full run, under 15 minutes
//	go run ./bench -configs wg-tun,wgpio-fastpath-1q -sizes 64 -queues 2 -duration 2s -out /tmp/r
//	go run ./bench -quick -peer same  # both gateways run the configuration
//
// Configurations: wg-tun (stock wireguard-go, kernel TUN + UDP, the
// reference), wg-mqtun (the same on a multi-queue TUN), wgpio-compat (stock
// wireguard-go on wgpio bind + tundev), wgpio-fastpath-1q and
// wgpio-fastpath-2q (the wgpio fast path). A configuration whose binary does
// not build is reported as skipped. Gateway 2 is stock wireguard-go on a
// kernel TUN unless -peer same. Ctrl-C (or SIGTERM) stops the run and
// removes everything it made; a gateway process dies with the rig
// (parent-death signal) even on SIGKILL, but namespaces are then left
// behind (`ip netns list | grep ^bench`).
//
// With -inprocess it measures instead in one process, without the kernel
// and without root: stock wireguard-go over fair in-memory conn.Bind and
// tun.Device doubles, wireguard-go on wgpio's bind and tundev over memport,
// and the fast path over memport, at 1 and 2 pinned CPUs (see package
// bench/internal/inproc and bench/README.md):
//
//	go run ./bench -inprocess -quick
//
// Linux only (network namespaces, AF_XDP; -inprocess pins threads with
// sched_setaffinity): every file is built for Linux alone.
package main

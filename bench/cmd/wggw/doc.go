//go:build linux

// Command wggw is the bench rig's reference gateway: stock wireguard-go
// (golang.zx2c4.com/wireguard, the version pinned in go.mod) with its
// default bind (kernel UDP sockets) on either wireguard-go's own kernel TUN
// (-queues 0) or wgpio's multi-queue kernel TUN (tundev.OpenMultiQueueTUN,
// -queues N). Nothing of wireguard-go is changed.
//
// It reads a UAPI "set=1" body (the cross-platform configuration protocol,
// https://www.wireguard.com/xplatform/#configuration-protocol) from the file
// given by -uapi, applies it with Device.IpcSet, brings the device up,
// prints "ready" on stdout and runs until SIGINT or SIGTERM. Addresses and
// routes on the TUN are the caller's business (the rig adds them).
//
// Usage (as root, inside the gateway's network namespace):
//
//	wggw -tun wgb0 -mtu 1420 -queues 0 -uapi gw.uapi
//
// Linux only (a kernel TUN): every file is built for Linux alone.
package main

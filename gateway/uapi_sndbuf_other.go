//go:build !linux

package gateway

import "net"

// growSendBuffer does nothing here (see uapi_sndbuf_linux.go).
func growSendBuffer(conn net.Conn, n int) {}

// Package uapiserve answers the WireGuard cross-platform userspace API
// (UAPI, https://www.wireguard.com/xplatform/) on one connection for a
// stock wireguard-go device whose set operation must be followed by work
// of the caller's before it is acknowledged (the compat modes: the LAN's
// XDP filter, the TUN's no_route table).
package uapiserve

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"

	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/ipc"
)

// Coder is an error that carries the (negative) errno of its UAPI reply;
// wireguard-go's *device.IPCError is one.
type Coder interface {
	error
	ErrorCode() int64
}

// Errno is the value of a reply's errno line for err: 0 for nil, the code
// of the first Coder in err's chain, else EINVAL (a malformed request).
func Errno(err error) int64 {
	if err == nil {
		return 0
	}
	var c Coder
	if errors.As(err, &c) {
		return c.ErrorCode()
	}
	return ipc.IpcErrorInvalid
}

// Serve answers the get=1 and set=1 operations on c until the client
// closes it or sends anything else (logged on log): a get with dev's
// IpcGetOperation, a set with set, which reads the operation's lines from
// r (wireguard-go's IpcSetOperation, and the caller's work after it)
// before the errno line (Errno) is written. Closes c. One goroutine per
// connection; set must be safe for concurrent use across connections.
func Serve(c net.Conn, dev *device.Device, set func(r io.Reader) error, log *slog.Logger) {
	defer c.Close()
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	for {
		op, err := r.ReadString('\n')
		if err != nil {
			return
		}
		switch op {
		case "set=1\n":
			err = set(r)
		case "get=1\n":
			// The operation line is followed by a blank line.
			if b, rerr := r.ReadByte(); rerr != nil {
				return
			} else if b != '\n' {
				err = fmt.Errorf("get=1 followed by %q, not a blank line", b)
				break
			}
			err = dev.IpcGetOperation(w)
		default:
			log.Warn("UAPI: unknown operation; closing the connection", "op", op)
			return
		}
		if _, werr := fmt.Fprintf(w, "errno=%d\n\n", Errno(err)); werr != nil {
			return
		}
		if w.Flush() != nil {
			return
		}
	}
}

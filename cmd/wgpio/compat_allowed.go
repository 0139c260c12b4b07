package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"

	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/ipc"

	"github.com/wgpio/wgpio/tundev"
)

// mqtunAllowed keeps compat-mqtun's TUN counting what stock wireguard-go
// would drop uncounted (tundev.MultiQueueTUN.SetAllowed: packets routed
// into the TUN to no peer's allowed IPs, no_route) in step with
// wireguard-go's allowed IPs: after the configuration at start, after a
// reload (set), and after each set on the UAPI socket (handleUAPI), before
// it is acknowledged, so that a packet to an allowed IP is never dropped.
// mu orders the syncs: the last table published is from the last
// configuration read.
type mqtunAllowed struct {
	dev *device.Device
	tun *tundev.MultiQueueTUN
	log *slog.Logger
	mu  sync.Mutex
}

// sync publishes wireguard-go's allowed IPs to the TUN. When they cannot
// be read the check is turned off (nothing dropped that wireguard-go would
// take) and the error returned.
func (a *mqtunAllowed) sync() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	conf, err := a.dev.IpcGet()
	var allowed []netip.Prefix
	if err == nil {
		allowed, err = parseAllowedIPs(strings.NewReader(conf))
	}
	if err != nil {
		a.tun.SetAllowed(nil)
		return fmt.Errorf("read wireguard-go's allowed IPs: %w", err)
	}
	a.tun.SetAllowed(allowed)
	return nil
}

// parseAllowedIPs returns the allowed_ip values of a UAPI get reply
// (https://www.wireguard.com/xplatform/, one key=value a line); never nil.
func parseAllowedIPs(r io.Reader) ([]netip.Prefix, error) {
	out := []netip.Prefix{}
	s := bufio.NewScanner(r)
	for s.Scan() {
		v, ok := strings.CutPrefix(s.Text(), "allowed_ip=")
		if !ok {
			continue
		}
		p, err := netip.ParsePrefix(v)
		if err != nil {
			return nil, fmt.Errorf("allowed_ip %q: %w", v, err)
		}
		out = append(out, p)
	}
	return out, s.Err()
}

// set applies body (a UAPI set without its "set=1" and blank lines) to
// wireguard-go, then syncs (a failed sync is logged: the check is off).
func (a *mqtunAllowed) set(body string) error {
	err := a.dev.IpcSet(body)
	if serr := a.sync(); serr != nil {
		a.log.Warn("TUN no_route check off", "err", serr)
	}
	return err
}

// handleUAPI answers the get=1 and set=1 operations of one UAPI
// connection with wireguard-go's IpcGetOperation and IpcSetOperation, a
// set followed by sync before its errno line, until the client closes c
// or sends anything else. Closes c.
func (a *mqtunAllowed) handleUAPI(c net.Conn) {
	defer c.Close()
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	for {
		op, err := r.ReadString('\n')
		if err != nil {
			return
		}
		switch op {
		case "set=1\n":
			err = a.dev.IpcSetOperation(r)
			if serr := a.sync(); serr != nil {
				a.log.Warn("TUN no_route check off", "err", serr)
			}
		case "get=1\n":
			// The operation line is followed by a blank line.
			if b, rerr := r.ReadByte(); rerr != nil {
				return
			} else if b != '\n' {
				err = fmt.Errorf("get=1 followed by %q, not a blank line", b)
				break
			}
			err = a.dev.IpcGetOperation(w)
		default:
			a.log.Warn("UAPI: unknown operation; closing the connection", "op", op)
			return
		}
		if _, werr := fmt.Fprintf(w, "errno=%d\n\n", ipcErrno(err)); werr != nil {
			return
		}
		if w.Flush() != nil {
			return
		}
	}
}

// ipcErrno is the errno line's value for err: 0 for nil, wireguard-go's
// code for its *device.IPCError, else EINVAL (a malformed request).
func ipcErrno(err error) int64 {
	if err == nil {
		return 0
	}
	var ie *device.IPCError
	if errors.As(err, &ie) {
		return ie.ErrorCode()
	}
	return ipc.IpcErrorInvalid
}

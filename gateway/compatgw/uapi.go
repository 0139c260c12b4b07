//go:build linux

package compatgw

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"syscall"

	"golang.zx2c4.com/wireguard/ipc"

	"github.com/wgpio/wgpio/internal/allowedips"
	"github.com/wgpio/wgpio/internal/uapiserve"
)

// serveUAPI serves the device's UAPI socket (uapiserve.Listen), so that
// wg(8) shows and sets it (handleUAPI), uapiserve.MaxConns connections at once
// (g.uapiConns: more wait up to uapiserve.SlotWait, then are refused and
// counted, Stats.UAPIRefused). Closing the listener (a closer) closes
// them and ends it.
func (g *Gateway) serveUAPI(name string) error {
	ln, err := uapiserve.Listen(name)
	if err != nil {
		return err
	}
	g.closers = append(g.closers, ln.Close)
	g.uapiConns = uapiserve.NewServer(g.log)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.uapiConns.Serve(ln, g.handleUAPI)
	}()
	return nil
}

// handleUAPI answers the get=1 and set=1 operations of one connection
// (https://www.wireguard.com/xplatform/) with wireguard-go's own
// IpcGetOperation and IpcSetOperation, until the client closes it or sends
// anything else. A set is followed by the LAN's XDP filter before its
// errno line is written (setOperation): when `wg set` or `wg syncconf`
// returns, the filter already takes the frames to every allowed IP the
// change added and no longer takes those it removed, as a Linux wg0
// routes by its allowed IPs the moment the netlink request is
// acknowledged. (Serving the socket with device.IpcHandle left that to
// followPrefixes: for up to SyncInterval a new prefix's frames went to the
// host's kernel, which drops them or forwards them in clear by another
// route.) A set that wireguard-go took but the filter could not follow is
// answered with the filter's errno (ENOSPC: the prefix map is full), else
// EIO. Closes c.
func (g *Gateway) handleUAPI(c net.Conn) {
	uapiserve.Serve(c, g.dev, g.setOperation, g.log)
}

// setOperation applies the set operation read from r (up to a blank line
// or the end) to wireguard-go and makes the LAN's XDP filter follow
// before it returns (handleUAPI). The set's text is read as wireguard-go
// reads it (io.TeeReader into an allowedips.Edit), applied to g.model and
// the difference it made to the allowed IPs applied to the filter
// (followSet): microseconds, where a sync reads the whole configuration
// (tens of ms at 10,000 peers, BenchmarkUAPISet). A set wireguard-go
// refused (it may have applied part of it), one whose effect the Edit
// does not model (replace_peers, a line it cannot parse),
// one naming a peer the model and wireguard-go disagree on, or any set
// while g.model is nil, syncs whole instead (syncLocked). g.mu is held
// throughout, so that the filter follows the sets in the order
// wireguard-go applied them. The error is wireguard-go's, else the
// filter's (filterError).
func (g *Gateway) setOperation(r io.Reader) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	var e allowedips.Edit
	err := g.dev.IpcSetOperation(io.TeeReader(r, &e))
	var serr error
	add, del, ok := []netip.Prefix(nil), []netip.Prefix(nil), false
	if err == nil && !e.Unfollowed && g.model != nil {
		add, del, ok = g.model.Follow(e.Ops, g.hasPeer)
	}
	if ok {
		serr = g.followSet(add, del)
		if movesAllowedIPs(e.Ops) {
			g.forgetNoEndpoint()
		}
	} else {
		serr = g.syncLocked()
	}
	if serr != nil {
		g.log.Warn("LAN XDP filter", "err", serr)
		if err == nil {
			err = filterError(serr)
		}
	}
	return err
}

// filterError is the UAPI error of a set that the LAN filter could not
// follow: the system error's errno, else EIO.
func filterError(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return &uapiError{code: -int64(errno), err: err}
	}
	return &uapiError{code: ipc.IpcErrorIO, err: err}
}

// uapiError is an error with the (negative) errno its reply carries.
type uapiError struct {
	code int64
	err  error
}

func (e *uapiError) Error() string { return fmt.Sprintf("uapi: errno %d: %v", e.code, e.err) }
func (e *uapiError) Unwrap() error { return e.err }

// ErrorCode is the errno of the reply (uapiserve.Coder).
func (e *uapiError) ErrorCode() int64 { return e.code }

// IpcSet applies body, a UAPI "set=1" operation without its "set=1" and
// blank lines, to wireguard-go as a set on the UAPI socket does
// (setOperation): the LAN's XDP filter follows before it returns. The
// error is wireguard-go's, or the filter's (filterError).
func (g *Gateway) IpcSet(body string) error {
	return g.setOperation(strings.NewReader(body))
}

//go:build linux

package main

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"golang.zx2c4.com/wireguard/device"

	"github.com/wgpio/wgpio/internal/allowedips"
	"github.com/wgpio/wgpio/internal/uapiserve"
	"github.com/wgpio/wgpio/tundev"
)

// mqtunAllowed keeps compat-mqtun's TUN counting what stock wireguard-go
// would drop uncounted (tundev.MultiQueueTUN.SetAllowed: packets routed
// into the TUN to no peer's allowed IPs, no_route) in step with
// wireguard-go's allowed IPs: after the configuration at start (sync),
// after a reload (set), and after each set on the UAPI socket
// (handleUAPI), before it is acknowledged, so that a packet to an allowed
// IP is never dropped.
//
// A sync reads wireguard-go's whole configuration (IpcGet: 93 ms at
// 10,000 peers), so a set is followed the way wireguard-go applies it
// (setOperation, internal/allowedips: an Edit of the set's lines applied
// to a Peers model of wireguard-go's peers and allowed IPs), and the TUN
// gets only the difference (UpdateAllowed); a set whose effect is not
// modelled, or that failed, syncs whole. mu guards model, and is held across a set
// and its update, so that updates reach the TUN in the order wireguard-go
// applied the sets.
type mqtunAllowed struct {
	dev *device.Device
	tun allowedTable
	log *slog.Logger

	mu sync.Mutex
	// routes, once set (setRoutes, at the start), route the prefixes the
	// allowed IPs gain into the TUN (nil: none routed).
	routes *mqtunRoutes
	// model is wireguard-go's peers and allowed IPs as the last sync read
	// them and the sets since changed them; nil when the last sync failed
	// (the check is off and the next set syncs whole).
	model *allowedips.Peers
	// syncs counts the syncs (whole reads of the configuration) so far.
	syncs int
}

// allowedTable is the TUN's no_route check (*tundev.MultiQueueTUN).
type allowedTable interface {
	SetAllowed(allowed []netip.Prefix)
	UpdateAllowed(add, del []netip.Prefix)
}

var _ allowedTable = (*tundev.MultiQueueTUN)(nil)

// sync publishes wireguard-go's allowed IPs to the TUN. When they cannot
// be read the check is turned off (nothing dropped that wireguard-go would
// take) and the error returned.
func (a *mqtunAllowed) sync() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.syncLocked()
}

// syncLocked is sync with mu held.
func (a *mqtunAllowed) syncLocked() error {
	a.syncs++
	var w allowedips.GetWriter
	err := a.dev.IpcGetOperation(&w)
	model, perr := w.Result()
	if err == nil {
		err = perr
	}
	if err != nil {
		a.model = nil
		a.tun.SetAllowed(nil)
		return fmt.Errorf("read wireguard-go's allowed IPs: %w", err)
	}
	a.model = model
	allowed := make([]netip.Prefix, 0, len(model.Owners()))
	for p := range model.Owners() {
		allowed = append(allowed, p)
	}
	a.tun.SetAllowed(allowed)
	a.route(allowed)
	if a.routes != nil { // the routes added since the start that left
		keep := make(map[netip.Prefix]bool, len(allowed))
		for _, p := range allowed {
			keep[p.Masked()] = true
		}
		a.routes.remove(slices.Collect(maps.Keys(a.routes.later)), keep)
	}
	return nil
}

// setRoutes makes r the routes the allowed IPs gained from now on go
// into.
func (a *mqtunAllowed) setRoutes(r *mqtunRoutes) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.routes = r
}

// route routes the allowed IPs added into the TUN (mqtunRoutes.add), a
// refusal logged. a.mu held.
func (a *mqtunAllowed) route(added []netip.Prefix) {
	if a.routes == nil || len(added) == 0 {
		return
	}
	if err := a.routes.add(added); err != nil {
		a.log.Warn("an allowed-IPs prefix added is not routed into the TUN: the host's packets to it take its other routes", "err", err)
	}
}

// set applies body (a UAPI set without its "set=1" and blank lines) to
// wireguard-go as setOperation does.
func (a *mqtunAllowed) set(body string) error {
	return a.setOperation(strings.NewReader(body))
}

// setOperation applies the set read from r (wireguard-go's
// IpcSetOperation: up to a blank line or the end) and brings the TUN's
// table in step before it returns: by the difference the set made when
// it succeeded and its allowedips.Edit followed it and the peers it names exist
// in wireguard-go exactly when the model says so, else by a sync (a
// failed sync is logged: the check is off). The error is wireguard-go's.
func (a *mqtunAllowed) setOperation(r io.Reader) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var e allowedips.Edit
	err := a.dev.IpcSetOperation(io.TeeReader(r, &e))
	if err != nil || e.Unfollowed || a.model == nil || !a.follow(e.Ops) {
		if serr := a.syncLocked(); serr != nil {
			a.log.Warn("TUN no_route check off", "err", serr)
		}
	}
	return err
}

// follow applies ops to the model (allowedips.Peers.Follow) and hands
// the TUN the difference. It reports false, the TUN untouched and the
// model to be rebuilt, when the model and wireguard-go disagree on a peer
// the set names.
func (a *mqtunAllowed) follow(ops []allowedips.Op) bool {
	add, del, ok := a.model.Follow(ops, func(k device.NoisePublicKey) bool { return a.dev.LookupPeer(k) != nil })
	if !ok {
		return false
	}
	a.tun.UpdateAllowed(add, del)
	a.route(add)
	if a.routes != nil {
		a.routes.remove(del, nil)
	}
	return true
}

// handleUAPI answers the get=1 and set=1 operations of one UAPI
// connection with wireguard-go's IpcGetOperation and IpcSetOperation, a
// set followed by sync before its errno line, until the client closes c
// or sends anything else. Closes c.
func (a *mqtunAllowed) handleUAPI(c net.Conn) {
	uapiserve.Serve(c, a.dev, a.setOperation, a.log)
}

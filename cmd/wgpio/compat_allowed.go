package main

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"

	"golang.zx2c4.com/wireguard/device"

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
// (setOperation, allowedEdit): peers and owners model wireguard-go's
// peers and its allowed IPs, and the TUN gets only the difference
// (UpdateAllowed); a set whose effect is not modelled, or that failed,
// syncs whole. mu guards peers, owners and on, and is held across a set
// and its update, so that updates reach the TUN in the order wireguard-go
// applied the sets.
type mqtunAllowed struct {
	dev *device.Device
	tun allowedTable
	log *slog.Logger

	mu sync.Mutex
	// peers holds each peer's allowed IPs, masked; owners the peer of
	// each allowed IP (wireguard-go gives a prefix to one peer only).
	peers  map[device.NoisePublicKey]map[netip.Prefix]struct{}
	owners map[netip.Prefix]device.NoisePublicKey
	// on is whether the last sync succeeded (else the check is off and
	// the next set syncs whole).
	on bool
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
	conf, err := a.dev.IpcGet()
	var peers map[device.NoisePublicKey]map[netip.Prefix]struct{}
	if err == nil {
		peers, err = parseAllowedIPs(strings.NewReader(conf))
	}
	if err != nil {
		a.on, a.peers, a.owners = false, nil, nil
		a.tun.SetAllowed(nil)
		return fmt.Errorf("read wireguard-go's allowed IPs: %w", err)
	}
	a.peers, a.owners = peers, make(map[netip.Prefix]device.NoisePublicKey)
	allowed := []netip.Prefix{}
	for k, ps := range peers {
		for p := range ps {
			a.owners[p] = k
			allowed = append(allowed, p)
		}
	}
	a.on = true
	a.tun.SetAllowed(allowed)
	return nil
}

// parseAllowedIPs returns the peers of a UAPI get reply
// (https://www.wireguard.com/xplatform/, one key=value a line), each with
// its allowed IPs (masked; never nil).
func parseAllowedIPs(r io.Reader) (map[device.NoisePublicKey]map[netip.Prefix]struct{}, error) {
	out := make(map[device.NoisePublicKey]map[netip.Prefix]struct{})
	var cur map[netip.Prefix]struct{}
	s := bufio.NewScanner(r)
	for s.Scan() {
		k, v, _ := strings.Cut(s.Text(), "=")
		switch k {
		case "public_key":
			var pk device.NoisePublicKey
			if err := pk.FromHex(v); err != nil {
				return nil, fmt.Errorf("public_key %q: %w", v, err)
			}
			cur = make(map[netip.Prefix]struct{})
			out[pk] = cur
		case "allowed_ip":
			p, err := netip.ParsePrefix(v)
			if err != nil {
				return nil, fmt.Errorf("allowed_ip %q: %w", v, err)
			}
			if cur == nil {
				return nil, fmt.Errorf("allowed_ip %q before a public_key", v)
			}
			cur[p.Masked()] = struct{}{}
		}
	}
	return out, s.Err()
}

// set applies body (a UAPI set without its "set=1" and blank lines) to
// wireguard-go as setOperation does.
func (a *mqtunAllowed) set(body string) error {
	return a.setOperation(strings.NewReader(body))
}

// setOperation applies the set read from r (wireguard-go's
// IpcSetOperation: up to a blank line or the end) and brings the TUN's
// table in step before it returns: by the difference the set made when
// it succeeded and allowedEdit followed it and the peers it names exist
// in wireguard-go exactly when the model says so, else by a sync (a
// failed sync is logged: the check is off). The error is wireguard-go's.
func (a *mqtunAllowed) setOperation(r io.Reader) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var e allowedEdit
	err := a.dev.IpcSetOperation(io.TeeReader(r, &e))
	if err != nil || e.unfollowed || !a.on || !a.follow(e.ops) {
		if serr := a.syncLocked(); serr != nil {
			a.log.Warn("TUN no_route check off", "err", serr)
		}
	}
	return err
}

// follow applies ops to the model as wireguard-go's IpcSetOperation
// applies them to the device (device/uapi.go: a public_key line selects
// or creates the peer; update_only on a created peer and remove remove
// it and leave the rest of its section ignored; replace_allowed_ips
// empties its allowed IPs; allowed_ip=p gives p to it, -p takes p from
// it if it has p), then hands the TUN the difference. It reports false,
// the TUN untouched and the model to be rebuilt, when a peer it names
// exists in the model but not in wireguard-go or the other way round
// (the device's own public key names a peer wireguard-go ignores).
func (a *mqtunAllowed) follow(ops []editOp) bool {
	before := make(map[netip.Prefix]bool) // had an owner before the set
	touch := func(p netip.Prefix) {
		if _, ok := before[p]; !ok {
			_, had := a.owners[p]
			before[p] = had
		}
	}
	drop := func(k device.NoisePublicKey) {
		for p := range a.peers[k] {
			touch(p)
			delete(a.owners, p)
		}
		clear(a.peers[k])
	}
	named := make(map[device.NoisePublicKey]struct{})
	var cur device.NoisePublicKey
	var created, ignored bool
	for _, op := range ops {
		if op.key == "public_key" {
			cur, ignored = op.peer, false
			named[cur] = struct{}{}
			_, ok := a.peers[cur]
			if created = !ok; created {
				a.peers[cur] = make(map[netip.Prefix]struct{})
			}
			continue
		}
		if ignored {
			continue
		}
		switch op.key {
		case "update_only", "remove":
			if op.key == "update_only" && !created {
				continue
			}
			drop(cur)
			delete(a.peers, cur)
			ignored = true
		case "replace_allowed_ips":
			drop(cur)
		case "allowed_ip":
			touch(op.prefix)
			owner, had := a.owners[op.prefix]
			switch {
			case op.del && had && owner == cur:
				delete(a.owners, op.prefix)
				delete(a.peers[cur], op.prefix)
			case !op.del:
				if had {
					delete(a.peers[owner], op.prefix)
				}
				a.owners[op.prefix] = cur
				a.peers[cur][op.prefix] = struct{}{}
			}
		}
	}
	for k := range named {
		_, ok := a.peers[k]
		if ok != (a.dev.LookupPeer(k) != nil) {
			return false
		}
	}
	var add, del []netip.Prefix
	for p, had := range before {
		_, has := a.owners[p]
		switch {
		case has && !had:
			add = append(add, p)
		case had && !has:
			del = append(del, p)
		}
	}
	a.tun.UpdateAllowed(add, del)
	return true
}

// handleUAPI answers the get=1 and set=1 operations of one UAPI
// connection with wireguard-go's IpcGetOperation and IpcSetOperation, a
// set followed by sync before its errno line, until the client closes c
// or sends anything else. Closes c.
func (a *mqtunAllowed) handleUAPI(c net.Conn) {
	uapiserve.Serve(c, a.dev, a.setOperation, a.log)
}

//go:build linux

package compatgw

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/gaissmai/bart"
	"golang.zx2c4.com/wireguard/device"

	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/internal/allowedips"
)

// prefixFilter is the LAN port's prefix match (*afxdp.Port).
type prefixFilter interface {
	AddPrefix(netip.Prefix) error
	DeletePrefix(netip.Prefix) error
}

var _ prefixFilter = (*afxdp.Port)(nil)

// noRouteSetter is what the PortDevice drops of the LAN's traffic before
// wireguard-go (*tundev.PortDevice).
type noRouteSetter interface {
	SetNoRoute(drop, pass []netip.Prefix)
}

// syncSpacing spaces the periodic syncs, in multiples of the last one's
// cost: a sync reads wireguard-go's whole configuration over its UAPI get
// (0.4-1 s of CPU at 50,000 peers, 16 MB of text), which every second
// would keep a core busy; spaced by 20 times its cost it takes at most a
// twentieth of a CPU. (A set through the UAPI socket or Gateway.IpcSet
// is followed at once, by its difference, before its reply:
// setOperation.)
const syncSpacing = 20

// followPrefixes keeps the LAN filter in step with the allowed IPs, which
// the Go API (Device().IpcSet) may change unseen by setOperation's model,
// until Close: every interval, and no sooner than syncSpacing times the
// last sync's cost after it. Each sync rebuilds the model, so that the
// sets after it follow wireguard-go's configuration again.
func (g *Gateway) followPrefixes(interval time.Duration) {
	defer g.wg.Done()
	poll := time.NewTimer(interval)
	defer poll.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-poll.C:
		}
		start := time.Now()
		if err := g.syncPrefixes(); err != nil {
			g.log.Warn("LAN XDP filter", "err", err)
		}
		poll.Reset(max(interval, syncSpacing*time.Since(start)))
	}
}

// syncPrefixes makes the LAN XDP filter redirect the allowed IPs
// wireguard-go has (read over its UAPI get, parsed as it is written), and
// those that left them, which it keeps (kept, publishKept). Calls are
// serialized from the read on, so that a sync that read the allowed IPs
// before a change cannot undo the sync that read them after it.
func (g *Gateway) syncPrefixes() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.syncLocked()
}

// syncLocked is syncPrefixes with g.mu held. It rebuilds g.model from the
// read, which a set then follows (followSet) while the sync succeeded;
// after an error g.model is nil and the next set syncs whole again.
func (g *Gateway) syncLocked() error {
	g.syncs++
	g.model = nil
	var w allowedips.GetWriter
	if err := g.dev.IpcGetOperation(&w); err != nil {
		return fmt.Errorf("read wireguard-go's allowed IPs: %w", err)
	}
	model, perr := w.Result()
	want := model.Owners()
	g.keptChanges = g.keptChanges[:0]
	g.allowedTable = new(bart.Table[struct{}])
	for p := range want {
		g.allowedTable.Insert(p, struct{}{})
	}
	if perr != nil { // wireguard-go writes none such: the sets sync whole
		g.log.Warn("LAN XDP filter: a line of wireguard-go's configuration not understood", "err", perr)
	}
	var errs prefixErrors
	changed, added, unkept, firstUnkept := false, false, 0, netip.Prefix{}
	for p := range g.kept {
		if _, ok := want[p]; ok { // back in the configuration, in its slot
			g.unmarkKept(p)
			changed, added = true, true
		}
	}
	for p := range want {
		if g.prefixes[p] {
			continue
		}
		q, err := g.addToFilter(p)
		if q.IsValid() {
			if unkept++; unkept == 1 {
				firstUnkept = q
			}
		}
		if err != nil {
			errs.add(err)
			continue
		}
		changed, added = true, true
	}
	for p := range g.prefixes {
		_, kept := g.kept[p]
		_, wanted := want[p]
		switch {
		case wanted:
			continue
		case !kept && p.Bits() > 0 && !covered(p, want):
			g.markKept(p)
			changed = true
			continue
		case kept && (!added || !covered(p, want)): // only a prefix added or back can cover it
			continue
		}
		// Not kept, or kept and now inside a configured prefix, which
		// the filter matches and wireguard-go routes to its peer.
		if err := g.filter.DeletePrefix(p); err != nil {
			errs.add(fmt.Errorf("delete %v: %w", p, err))
			continue
		}
		if kept {
			g.unmarkKept(p)
		}
		delete(g.prefixes, p)
		g.inFilter[family(p)]--
		changed = true
	}
	if g.keepTunnelNets(want, &errs) {
		changed = true
	}
	if unkept > 0 {
		g.logUnkept(unkept, firstUnkept)
	}
	if changed || unkept > 0 {
		g.publishKept(want)
		g.publishAllowed(want)
	}
	g.publishNoEndpoint(&w, want)
	g.keptChanges = nil // a whole sync's: followSet's are few
	err := errs.err()
	if err == nil && perr == nil {
		g.model = model
	}
	return err
}

// logUnkept says that n kept prefixes, the first first, gave their slots
// in the LAN filter to configured ones.
func (g *Gateway) logUnkept(n int, first netip.Prefix) {
	g.log.Info("the LAN XDP prefix map is full: prefixes that left wireguard-go's allowed IPs are no longer kept in it, the kernel forwards their packets by the host's routes",
		"prefixes", n, "first", first)
}

// markKept records p, in the LAN filter, as kept; unmarkKept records it
// as no longer kept (g.kept, g.keptN, g.keptTable). g.mu must be held.
func (g *Gateway) markKept(p netip.Prefix) {
	g.keptChanges = append(g.keptChanges, p)
	g.kept[p] = struct{}{}
	g.keptN[family(p)]++
	g.keptTable.Insert(p, struct{}{})
}

func (g *Gateway) unmarkKept(p netip.Prefix) {
	g.keptChanges = append(g.keptChanges, p)
	delete(g.kept, p)
	g.keptN[family(p)]--
	g.keptTable.Delete(p)
}

// covered reports whether a prefix of want other than p contains p: then
// the LAN filter matches p's packets by that prefix, and wireguard-go
// sends them to its peer. At most 129 map look-ups.
func covered[V any](p netip.Prefix, want map[netip.Prefix]V) bool {
	for b := p.Bits() - 1; b >= 0; b-- {
		q, _ := p.Addr().Prefix(b)
		if _, ok := want[q]; ok {
			return true
		}
	}
	return false
}

// family is 0 for an IPv4 prefix, 1 for IPv6: the LAN filter holds
// capacity prefixes of each.
func family(p netip.Prefix) int {
	if p.Addr().Is4() {
		return 0
	}
	return 1
}

// unkeep takes one kept prefix of family f out of the LAN filter, to
// free its slot for one of wireguard-go's allowed IPs, and returns it:
// the kernel forwards what the LAN sends it by the host's routes again.
// g.mu must be held.
// addToFilter puts the allowed IP p into the filter, giving it first the
// slot of a kept prefix of its family when the filter is full; unkept is
// the kept prefix that left (invalid: none), also when the add then
// failed. g.mu must be held.
func (g *Gateway) addToFilter(p netip.Prefix) (unkept netip.Prefix, err error) {
	f := family(p)
	if g.inFilter[f] >= g.capacity && g.keptN[f] > 0 {
		q, err := g.unkeep(f)
		if err != nil {
			return netip.Prefix{}, err
		}
		unkept = q
	}
	if err := g.filter.AddPrefix(p); err != nil {
		return unkept, fmt.Errorf("add %v: %w", p, err)
	}
	g.prefixes[p] = true
	g.inFilter[f]++
	return unkept, nil
}

func (g *Gateway) unkeep(f int) (netip.Prefix, error) {
	for p := range g.kept {
		if family(p) != f {
			continue
		}
		if err := g.filter.DeletePrefix(p); err != nil {
			return p, fmt.Errorf("delete kept %v: %w", p, err)
		}
		g.unmarkKept(p)
		delete(g.prefixes, p)
		g.inFilter[f]--
		return p, nil
	}
	return netip.Prefix{}, fmt.Errorf("%d prefixes of family %d kept, none found", g.keptN[f], f)
}

// publishKept hands the PortDevice the kept prefixes, whose packets it
// drops as no_route, and the allowed IPs inside them, whose packets go
// on to wireguard-go (tundev.PortDevice.SetNoRoute): O(len(want)) trie
// look-ups while a prefix is kept, nothing more otherwise. g.mu must be
// held.
func (g *Gateway) publishKept(want map[netip.Prefix]device.NoisePublicKey) {
	if g.noRoute == nil {
		return
	}
	clear(g.pass)
	if len(g.kept) == 0 {
		g.noRoute.SetNoRoute(nil, nil)
		return
	}
	drop := make([]netip.Prefix, 0, len(g.kept))
	for p := range g.kept {
		drop = append(drop, p)
	}
	var pass []netip.Prefix
	for p := range want {
		if _, ok := g.keptTable.LookupPrefix(p); ok {
			pass = append(pass, p)
			g.pass[p] = struct{}{}
		}
	}
	g.noRoute.SetNoRoute(drop, pass)
}

// allowedSetter is what the PortDevice does with the allowed IPs besides
// the kept prefixes: peer-to-peer forwarding (tundev.PortDevice.
// SetAllowedIPs).
type allowedSetter interface {
	SetAllowedIPs(allowed []netip.Prefix)
}

// publishAllowed hands the PortDevice every allowed IP of want, for
// peer-to-peer forwarding, when g.noRoute takes them. O(len(want)); g.mu
// must be held.
func (g *Gateway) publishAllowed(want map[netip.Prefix]device.NoisePublicKey) {
	a, ok := g.noRoute.(allowedSetter)
	if !ok {
		return
	}
	all := make([]netip.Prefix, 0, len(want))
	for p := range want {
		all = append(all, p)
	}
	a.SetAllowedIPs(all)
}

// maxPrefixErrors is how many failed prefixes a sync's error names; the
// others are counted. A LAN map too small for the configuration (ENOSPC
// for each prefix beyond it) made every sync's warning list them all: at
// 100,000 peers, a line of megabytes every few seconds.
const maxPrefixErrors = 10

// prefixErrors gathers a sync's errors, the first maxPrefixErrors of them
// and a count of the rest. The zero value is empty.
type prefixErrors struct {
	errs []error
	n    int
}

func (e *prefixErrors) add(err error) {
	e.n++
	if len(e.errs) < maxPrefixErrors {
		e.errs = append(e.errs, err)
	}
}

// err joins the errors kept (errors.Join; nil if none), followed by the
// number of those not kept.
func (e *prefixErrors) err() error {
	if more := e.n - len(e.errs); more > 0 {
		return errors.Join(append(e.errs, fmt.Errorf("%d more prefixes failed (%d in all), not listed", more, e.n))...)
	}
	return errors.Join(e.errs...)
}

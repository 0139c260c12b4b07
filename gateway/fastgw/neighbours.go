//go:build linux

package fastgw

import (
	"time"

	"github.com/wgpio/wgpio/arp"
)

// NeighbourStats are owned address mode's ARP and NDP counters of one side:
// what its responder (arp.Responder) answered and dropped, and its
// neighbour table's (arp.Table).
type NeighbourStats struct {
	// Replies counts the ARP replies and neighbour advertisements sent
	// for our address.
	Replies uint64 `json:"replies"`
	// Drops counts the ARP and NDP frames the responder took and
	// neither answered nor learnt from, by reason (arp.Reason's names:
	// truncated, op, not-for-us, not-our-address, ...).
	Drops map[string]uint64 `json:"drops,omitempty"`
	// Requests is the requests the table sent, Failed the neighbours
	// that did not answer them, Full the entries it refused at its
	// bound and Evicted those it deleted to make room (arp.TableStats).
	Requests uint64 `json:"requests"`
	Failed   uint64 `json:"failed"`
	Full     uint64 `json:"full"`
	Evicted  uint64 `json:"evicted"`
	// Conflicts counts the other hosts seen claiming our address (64 at
	// most), Claims the frames in which they did.
	Conflicts int    `json:"conflicts"`
	Claims    uint64 `json:"claims"`
	// MLD counts, on a VLAN side with an IPv6 address, the MLD queries
	// for our solicited-node groups and the reports we sent for them
	// (arp.MLDHost); nil elsewhere, where the kernel reports them.
	MLD *arp.MLDHostStats `json:"mld,omitempty"`
}

// Neighbours returns owned address mode's ARP and NDP counters by side
// ("wan", "lan"); false in shared address mode, where the kernel answers
// and counts them.
func (g *Gateway) Neighbours() (map[string]NeighbourStats, bool) {
	if g.wanResp == nil || g.lanResp == nil {
		return nil, false
	}
	return map[string]NeighbourStats{
		"wan": neighbourStats(g.wanResp, g.wanTable),
		"lan": neighbourStats(g.lanResp, g.lanTable),
	}, true
}

func neighbourStats(r *arp.Responder, t *arp.Table) NeighbourStats {
	ts := t.Stats()
	ns := NeighbourStats{Replies: r.Replies(), Drops: r.DropCounts(), Requests: ts.Requests, Failed: ts.Failed,
		Full: ts.Full, Evicted: ts.Evicted, Conflicts: len(r.Conflicts()), Claims: r.Claims()}
	if h := r.MLD(); h != nil {
		s := h.Stats()
		ns.MLD = &s
	}
	return ns
}

// conflictInterval is the least time between two warnings of hosts
// claiming our addresses.
const conflictInterval = time.Minute

// watchConflicts warns, at most once a conflictInterval, of the hosts seen
// claiming owned mode's WANAddress or LANAddress (an ARP or NDP frame from
// another MAC giving one of them as its own: a misconfigured host, or
// one taking our traffic), until g.tableDone is closed. Before, they were
// recorded and never told.
func (g *Gateway) watchConflicts() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	told := map[string]uint64{}
	var last time.Time
	for {
		select {
		case <-g.tableDone:
			return
		case now := <-tick.C:
			if now.Sub(last) < conflictInterval {
				continue
			}
			for side, r := range map[string]*arp.Responder{"wan": g.wanResp, "lan": g.lanResp} {
				n, c := r.Claims(), r.Conflicts()
				if n <= told[side] || len(c) == 0 {
					continue
				}
				g.log.Warn("another host claims the gateway's own address (an ARP or NDP frame from another MAC): a misconfigured host, or one taking its traffic",
					"side", side, "address", c[len(c)-1].Addr, "mac", c[len(c)-1].MAC, "hosts", len(c), "frames", n)
				told[side], last = n, now
			}
		}
	}
}

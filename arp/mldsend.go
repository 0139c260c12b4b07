package arp

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Host-side MLD timers (RFC 3810 §9 defaults, which a host uses: it learns
// none of them from MLDv1 queriers).
const (
	// MLDUnsolicitedReportInterval bounds the random wait before the
	// retransmission of a state-change report (§9.11).
	MLDUnsolicitedReportInterval = time.Second
	// MLDOlderVersionQuerierTimeout is how long a host answers in MLDv1
	// after an MLDv1 query (§9.12: Robustness Variable 2 × Query Interval
	// 125 s + Query Response Interval 10 s).
	MLDOlderVersionQuerierTimeout = 260 * time.Second
	// mldRobustness is the Robustness Variable (§9.1): a state-change
	// report is sent that many times.
	mldRobustness = 2
)

// MLDHostConfig describes the groups an MLDHost announces.
type MLDHostConfig struct {
	// MAC is the Ethernet source of the reports.
	MAC MAC
	// Src is their IPv6 source: the interface's link-local address, or
	// the unspecified address when it has none (RFC 3810 §5.2.13, RFC
	// 3590 §4). Zero means ::.
	Src netip.Addr
	// Groups are the IPv6 multicast groups we listen to.
	Groups []netip.Addr
	// Send transmits one untagged frame (the caller tags it for its
	// VLAN); it must not keep frame after it returns. Called from the
	// host's own goroutine, from Start and from Close.
	Send func(frame []byte) error
}

// MLDHost is the listener side of MLD (RFC 3810 §6, with MLDv1
// compatibility, §8) for groups joined where the kernel cannot announce
// them: on a VLAN of a trunk that has no kernel VLAN device, whose reports
// the kernel would send untagged. Start announces the groups with
// unsolicited state-change reports (CHANGE_TO_EXCLUDE, no sources), sent
// [Robustness Variable] = 2 times, the second after a random wait of up to
// 1 s (§6.1); Query takes the queries received on the link and schedules
// one current-state report (MODE_IS_EXCLUDE for every group) after a
// random delay up to the query's Maximum Response Delay (§6.2), one timer
// for all queries: an earlier pending report answers the later queries
// too; Close sends CHANGE_TO_INCLUDE with no sources, the leave.
// Differences from RFC 3810 §6.2, whose only effect is a report more than
// needed: a Multicast Address Specific Query for one of our groups is
// answered with the records of all of them, and a Multicast Address and
// Source Specific Query as if it named no sources (MODE_IS_EXCLUDE with
// none: we listen to every source). After an MLDv1 query it answers in
// MLDv1 (one Report per group, to the group; Done to ff02::2 at Close) for
// MLDOlderVersionQuerierTimeout (§8.2.1).
type MLDHost struct {
	cfg     MLDHostConfig
	kick    chan struct{}
	done    chan struct{}
	wg      sync.WaitGroup
	started atomic.Bool
	closed  atomic.Bool

	// due is when the pending answer to queries goes (Unix ns; 0: none).
	due atomic.Int64
	// v1Until is when the MLDv1 querier's presence ends (Unix ns).
	v1Until atomic.Int64

	queries, reports, errs atomic.Uint64
}

// NewMLDHost returns an MLDHost for cfg; it sends nothing before Start.
func NewMLDHost(cfg MLDHostConfig) (*MLDHost, error) {
	if !cfg.Src.IsValid() {
		cfg.Src = netip.IPv6Unspecified()
	}
	if !cfg.Src.Is6() || cfg.Send == nil || len(cfg.Groups) == 0 {
		return nil, errors.New("arp: MLD host needs an IPv6 source, groups and Send")
	}
	for _, g := range cfg.Groups {
		if !g.Is6() || !g.IsMulticast() {
			return nil, fmt.Errorf("arp: MLD host: %v is not an IPv6 multicast group", g)
		}
	}
	cfg.Groups = slices.Clone(cfg.Groups)
	return &MLDHost{cfg: cfg, kick: make(chan struct{}, 1), done: make(chan struct{})}, nil
}

// Start sends the first unsolicited report and runs the host's goroutine,
// which sends the second and answers queries until Close. A second call
// does nothing.
func (h *MLDHost) Start() {
	if h.closed.Load() || !h.started.CompareAndSwap(false, true) {
		return
	}
	h.report(MLDChangeToExclude)
	h.wg.Add(1)
	go h.run(time.Now().Add(randUpTo(MLDUnsolicitedReportInterval)))
}

// randUpTo returns a random duration in (0, d], or 0 for d <= 0.
func randUpTo(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(d))) + 1
}

// run sends the retransmission at retrans and the answers to queries.
func (h *MLDHost) run(retrans time.Time) {
	defer h.wg.Done()
	t := time.NewTimer(time.Until(retrans))
	defer t.Stop()
	for left := mldRobustness - 1; ; {
		next := int64(0)
		if left > 0 {
			next = retrans.UnixNano()
		}
		if d := h.due.Load(); d != 0 && (next == 0 || d < next) {
			next = d
		}
		if next != 0 {
			t.Reset(time.Until(time.Unix(0, next)))
		} else {
			t.Stop()
		}
		select {
		case <-h.done:
			return
		case <-h.kick:
		case <-t.C:
			now := time.Now()
			if left > 0 && !now.Before(retrans) {
				left--
				h.report(MLDChangeToExclude)
			}
			if d := h.due.Load(); d != 0 && now.UnixNano() >= d && h.due.CompareAndSwap(d, 0) {
				h.report(MLDModeIsExclude)
			}
		}
	}
}

// Query takes a query received on the link, and reports whether it asked
// about our groups (a General Query, or one for one of them), in which
// case a report is scheduled. Safe for concurrent use; allocates nothing.
func (h *MLDHost) Query(q MLDQuery) bool {
	if !q.Group.IsUnspecified() && !slices.Contains(h.cfg.Groups, q.Group) {
		return false
	}
	h.queries.Add(1)
	now := time.Now().UnixNano()
	if q.Version == 1 {
		h.v1Until.Store(now + int64(MLDOlderVersionQuerierTimeout))
	}
	at := now + int64(randUpTo(q.MaxDelay))
	for {
		cur := h.due.Load()
		if cur != 0 && cur <= at {
			break // an earlier answer is pending (§6.2 rule 1)
		}
		if h.due.CompareAndSwap(cur, at) {
			break
		}
	}
	select {
	case h.kick <- struct{}{}:
	default:
	}
	return true
}

// report sends a report of every group: MLDv2 records of type recType, or,
// with an MLDv1 querier present, an MLDv1 Report per group (a Done per
// group for MLDChangeToInclude).
func (h *MLDHost) report(recType uint8) {
	var buf [MLDv1FrameLen + 16*mldv2RecordLen]byte
	send := func(n int, err error) {
		if err == nil {
			err = h.cfg.Send(buf[:n])
		}
		if err != nil {
			h.errs.Add(1)
			return
		}
		h.reports.Add(1)
	}
	if time.Now().UnixNano() < h.v1Until.Load() {
		typ := uint8(ICMPv6MLDv1Report)
		if recType == MLDChangeToInclude {
			typ = ICMPv6MLDv1Done
		}
		for _, g := range h.cfg.Groups {
			send(MarshalMLDv1(buf[:], h.cfg.MAC, h.cfg.Src, typ, g))
		}
		return
	}
	for gs := h.cfg.Groups; len(gs) > 0; {
		n := min(len(gs), 16)
		send(MarshalMLDv2Report(buf[:], h.cfg.MAC, h.cfg.Src, recType, gs[:n]))
		gs = gs[n:]
	}
}

// Close stops the host and, if it was started, sends the leave (RFC 3810
// §6.1: CHANGE_TO_INCLUDE with no sources; MLDv1 Done), once: Send must
// still work. Safe to call more than once.
func (h *MLDHost) Close() {
	if !h.closed.CompareAndSwap(false, true) {
		return
	}
	close(h.done)
	h.wg.Wait()
	if h.started.Load() {
		h.report(MLDChangeToInclude)
	}
}

// MLDHostStats are an MLDHost's counters.
type MLDHostStats struct {
	// Queries counts the queries that asked about our groups.
	Queries uint64 `json:"queries"`
	// Reports counts the reports sent (an MLDv2 report or one MLDv1
	// message), Errors those that could not be (Send failed).
	Reports uint64 `json:"reports"`
	Errors  uint64 `json:"errors,omitempty"`
}

// Stats returns the counters; a nil host returns zeros.
func (h *MLDHost) Stats() MLDHostStats {
	if h == nil {
		return MLDHostStats{}
	}
	return MLDHostStats{Queries: h.queries.Load(), Reports: h.reports.Load(), Errors: h.errs.Load()}
}

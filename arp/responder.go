package arp

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ResponderConfig describes the addresses a Responder answers for.
type ResponderConfig struct {
	// MAC is the interface's address: the source of every reply and the
	// only unicast destination accepted.
	MAC MAC
	// Addrs are our addresses, IPv4 and IPv6 (zones are ignored). IPv6
	// addresses are tentative, neither answered for nor announced, until
	// DAD passes (RFC 4862 §5.4), unless SkipDAD.
	Addrs []netip.Addr
	// SkipDAD makes IPv6 addresses preferred at once.
	SkipDAD bool
	// Table, if not nil, learns the neighbours that talk to us and takes
	// the confirmations of our requests (ARP replies, solicited NAs).
	Table *Table
	// Router sets the Router flag of every neighbour advertisement, as a
	// router sends them (RFC 4861 §4.4, §7.2.4; Linux with forwarding on):
	// a host that took us for a router and then sees the flag clear
	// stops using us as one (§7.2.5).
	Router bool
}

// Conflict is another host claiming one of our addresses: an ARP packet
// with our address as sender, an NA for it, or, during DAD, an NS for it
// from the unspecified address (RFC 4862 §5.4.3, §5.4.4).
type Conflict struct {
	Addr netip.Addr
	MAC  MAC // the other host's, as far as known
}

// ConflictError is returned by DAD when an address is in use elsewhere.
type ConflictError struct{ Conflicts []Conflict }

func (e *ConflictError) Error() string {
	return fmt.Sprintf("arp: duplicate address %v (at %v)", e.Conflicts[0].Addr, e.Conflicts[0].MAC)
}

type ownAddr struct {
	ip        netip.Addr
	snm       netip.Addr // solicited-node group (IPv6)
	tentative atomic.Bool
	conflict  atomic.Bool
}

// Responder answers ARP requests and neighbour solicitations for our
// addresses (owned mode). Handle is safe for concurrent use from several
// queue goroutines and allocates nothing; the set of addresses is fixed at
// NewResponder.
type Responder struct {
	mac    MAC
	router bool
	addrs  []*ownAddr
	table  *Table
	mld    *MLDHost // set before the first Handle (SetMLD)
	drops  [numReasons]atomic.Uint64

	replies atomic.Uint64
	claims  atomic.Uint64 // frames claiming our addresses (conflict)

	mu        sync.Mutex
	conflicts []Conflict // guarded by mu
}

// NewResponder returns a Responder for cfg.
func NewResponder(cfg ResponderConfig) (*Responder, error) {
	if cfg.MAC.IsMulticast() || cfg.MAC.IsZero() {
		return nil, fmt.Errorf("arp: new responder: MAC %v is not a unicast address", cfg.MAC)
	}
	r := &Responder{mac: cfg.MAC, router: cfg.Router, table: cfg.Table}
	for _, ip := range cfg.Addrs {
		ip = ip.Unmap().WithZone("")
		if !ip.IsValid() || ip.IsUnspecified() || ip.IsMulticast() {
			return nil, fmt.Errorf("arp: new responder: %v is not a unicast address", ip)
		}
		a := &ownAddr{ip: ip}
		if ip.Is6() {
			a.snm = SolicitedNode(ip)
			a.tentative.Store(!cfg.SkipDAD)
		}
		r.addrs = append(r.addrs, a)
	}
	return r, nil
}

// SolicitedNodeGroups returns the solicited-node multicast groups of our
// IPv6 addresses (RFC 4291 §2.7.1), which the interface must receive (join
// them with JoinGroups, which announces them to MLD-snooping switches, or
// make the XDP program pass 33:33:ff:xx:xx:xx).
func (r *Responder) SolicitedNodeGroups() []netip.Addr {
	var g []netip.Addr
	for _, a := range r.addrs {
		if a.ip.Is6() {
			g = append(g, a.snm)
		}
	}
	return g
}

func (r *Responder) own(ip netip.Addr) *ownAddr {
	for _, a := range r.addrs {
		if a.ip == ip {
			return a
		}
	}
	return nil
}

// Drops returns the number of frames dropped for reason rs.
func (r *Responder) Drops(rs Reason) uint64 {
	if rs >= numReasons {
		return 0
	}
	return r.drops[rs].Load()
}

// DropCounts returns the non-zero drop counters by reason name.
func (r *Responder) DropCounts() map[string]uint64 {
	m := make(map[string]uint64)
	for i := Reason(ReasonTruncated); i < numReasons; i++ {
		if v := r.drops[i].Load(); v != 0 {
			m[i.String()] = v
		}
	}
	return m
}

// Replies returns the number of replies written by Handle.
func (r *Responder) Replies() uint64 { return r.replies.Load() }

// Conflicts returns the hosts seen claiming our addresses so far (one
// entry per address and MAC, 64 at most).
func (r *Responder) Conflicts() []Conflict {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Conflict(nil), r.conflicts...)
}

// conflict records a frame of mac claiming a's address: a Conflict per
// other host (address and MAC), 64 at most, and every claim in
// Claims.
func (r *Responder) conflict(a *ownAddr, mac MAC) {
	a.conflict.Store(true)
	r.claims.Add(1)
	c := Conflict{Addr: a.ip, MAC: mac}
	r.mu.Lock()
	if len(r.conflicts) < 64 && !slices.Contains(r.conflicts, c) {
		r.conflicts = append(r.conflicts, c)
	}
	r.mu.Unlock()
}

// Claims counts the frames seen claiming one of our addresses from
// another MAC (Conflicts lists the hosts).
func (r *Responder) Claims() uint64 { return r.claims.Load() }

func (r *Responder) drop(rs Reason) (int, Reason) {
	r.drops[rs].Add(1)
	return 0, rs
}

// Handle takes one received untagged Ethernet frame (ARP, NDP, or an MLD
// query for SetMLD's host). If the frame asks for one of our addresses it
// writes the answer into out and returns its length n > 0 (out needs
// MinFrameLen bytes for ARP, NDPFrameLen for NDP; the caller transmits
// out[:n]). It feeds learnt neighbours and confirmations to the table. It
// returns ReasonNotNeighbour, without counting, for frames that are
// neither ARP nor NS/NA nor an MLD query (pass them on), ReasonNone for
// frames used, and any other reason for frames dropped (counted). Frames are
// accepted only when addressed to us: unicast to our MAC, a broadcast ARP
// request for one of our addresses, or an NS to the solicited-node group of
// one of our addresses; senders with a group source MAC are refused. Handle
// keeps neither slice and allocates nothing.
func (r *Responder) Handle(frame, out []byte) (int, Reason) {
	if len(frame) < EthernetHeaderLen {
		return r.drop(ReasonTruncated)
	}
	switch uint16(frame[12])<<8 | uint16(frame[13]) {
	case EtherTypeARP:
		return r.handleARP(frame, out)
	case EtherTypeIPv6:
		if n, rs := r.handleNDP(frame, out); rs != ReasonNotNeighbour {
			return n, rs
		}
		return r.handleMLD(frame)
	}
	return 0, ReasonNotNeighbour
}

// SetMLD makes Handle pass the MLD queries it receives to h (nil: none),
// which announces our solicited-node groups where the kernel cannot. Call
// it before the first Handle.
func (r *Responder) SetMLD(h *MLDHost) { r.mld = h }

// MLD returns SetMLD's host (nil without one).
func (r *Responder) MLD() *MLDHost { return r.mld }

// handleMLD takes an MLD query (ParseMLDQuery) for the MLDHost: used when
// it asks about our groups, dropped as not-for-us otherwise (another
// group's, or no MLDHost to answer it).
func (r *Responder) handleMLD(frame []byte) (int, Reason) {
	q, rs := ParseMLDQuery(frame)
	if rs == ReasonNotNeighbour {
		return 0, rs
	}
	if rs != ReasonNone {
		return r.drop(rs)
	}
	if q.EthSrc.IsMulticast() {
		return r.drop(ReasonSourceMAC)
	}
	if (q.EthDst != r.mac && q.EthDst != MulticastMAC(q.Dst)) || r.mld == nil || !r.mld.Query(q) {
		return r.drop(ReasonNotForUs)
	}
	return 0, ReasonNone
}

func (r *Responder) handleARP(frame, out []byte) (int, Reason) {
	p, rs := ParseARP(frame)
	if rs != ReasonNone {
		return r.drop(rs)
	}
	if p.EthSrc.IsMulticast() || p.SenderMAC.IsMulticast() {
		return r.drop(ReasonSourceMAC)
	}
	forUs := p.EthDst == r.mac || p.EthDst == Broadcast && p.Op == ARPRequest && r.own(p.TargetIP) != nil
	if !forUs && r.table != nil && !p.SenderIP.IsUnspecified() && p.SenderMAC != r.mac && r.own(p.SenderIP) == nil &&
		r.table.Update(p.SenderIP, p.SenderMAC) {
		// Not for us, but RFC 826's merge updates the sender's entry
		// if we have one: a gratuitous ARP (RFC 5227 §3), another's
		// request or reply from a neighbour that moved.
		return 0, ReasonNone
	}
	if p.EthDst != r.mac && !(p.EthDst == Broadcast && p.Op == ARPRequest) {
		return r.drop(ReasonNotForUs)
	}
	if a := r.own(p.SenderIP); a != nil && p.SenderMAC != r.mac {
		// Someone else uses our address (RFC 5227 §2.4).
		r.conflict(a, p.SenderMAC)
		return r.drop(ReasonAddressConflict)
	}
	if p.Op == ARPReply {
		if p.EthDst != r.mac {
			return r.drop(ReasonNotForUs)
		}
		if r.table != nil && !p.SenderIP.IsUnspecified() {
			r.table.Confirm(p.SenderIP, p.SenderMAC)
		}
		return 0, ReasonNone
	}
	a := r.own(p.TargetIP)
	if a == nil {
		return r.drop(ReasonNotOurAddress)
	}
	// RFC 826 "merge": the requester is a neighbour that talks to us.
	// A probe (RFC 5227 §2.1.1) has sender 0.0.0.0 and teaches nothing.
	if r.table != nil && !p.SenderIP.IsUnspecified() {
		r.table.Learn(p.SenderIP, p.SenderMAC)
	}
	reply := ARP{
		EthDst: p.SenderMAC, EthSrc: r.mac, Op: ARPReply,
		SenderMAC: r.mac, SenderIP: a.ip,
		TargetMAC: p.SenderMAC, TargetIP: p.SenderIP,
	}
	n, err := reply.Marshal(out)
	if err != nil {
		return r.drop(ReasonTruncated)
	}
	r.replies.Add(1)
	return n, ReasonNone
}

func (r *Responder) handleNDP(frame, out []byte) (int, Reason) {
	m, rs := ParseNDP(frame)
	if rs == ReasonNotNeighbour {
		return 0, rs
	}
	if rs != ReasonNone {
		return r.drop(rs)
	}
	if m.EthSrc.IsMulticast() || (m.HasLinkAddr && m.LinkAddr.IsMulticast()) {
		return r.drop(ReasonSourceMAC)
	}
	a := r.own(m.Target)
	if m.Type == ICMPv6NA {
		if a != nil {
			// An NA for our address: a duplicate (RFC 4862
			// §5.4.4), tentative or not.
			mac := m.EthSrc
			if m.HasLinkAddr {
				mac = m.LinkAddr
			}
			if mac != r.mac {
				r.conflict(a, mac)
				return r.drop(ReasonAddressConflict)
			}
			return r.drop(ReasonNotForUs) // our own, looped back
		}
		if m.EthDst != r.mac || !m.Solicited || r.own(m.Dst) == nil {
			// An unsolicited advertisement makes no entry (RFC 4861
			// §7.2.5); with the Override flag and the link-layer
			// address it updates one we have (Table.Update).
			if m.Override && m.HasLinkAddr && r.table != nil && r.table.Update(m.Target, m.LinkAddr) {
				return 0, ReasonNone
			}
			return r.drop(ReasonNotForUs)
		}
		if r.table != nil {
			mac := m.EthSrc
			if m.HasLinkAddr {
				mac = m.LinkAddr
			}
			r.table.Confirm(m.Target, mac)
		}
		return 0, ReasonNone
	}
	// Neighbour solicitation.
	if a == nil {
		return r.drop(ReasonNotOurAddress)
	}
	if m.Dst != a.ip && m.Dst != a.snm {
		return r.drop(ReasonNotForUs)
	}
	if m.EthDst != r.mac && m.EthDst != MulticastMAC(m.Dst) {
		return r.drop(ReasonNotForUs)
	}
	if a.tentative.Load() {
		if m.Src.IsUnspecified() && m.EthSrc != r.mac {
			// Another node probes the same address (RFC 4862
			// §5.4.3).
			r.conflict(a, m.EthSrc)
		}
		return r.drop(ReasonTentative)
	}
	na := NDP{
		EthSrc: r.mac, Src: a.ip, Type: ICMPv6NA, Target: a.ip,
		Router: r.router, Override: true, HasLinkAddr: true, LinkAddr: r.mac,
	}
	if m.Src.IsUnspecified() {
		// RFC 4861 §7.2.4: to all-nodes, Solicited clear.
		na.Dst, na.EthDst = allNodes, MulticastMAC(allNodes)
	} else {
		na.Dst, na.Solicited = m.Src, true
		na.EthDst = m.EthSrc
		if m.HasLinkAddr {
			na.EthDst = m.LinkAddr
			if r.table != nil {
				r.table.Learn(m.Src, m.LinkAddr)
			}
		}
	}
	n, err := na.Marshal(out)
	if err != nil {
		return r.drop(ReasonTruncated)
	}
	r.replies.Add(1)
	return n, ReasonNone
}

// Announce sends, through send, a gratuitous ARP (an ARP announcement, RFC
// 5227 §3: a broadcast request with our address as sender and target) for
// each IPv4 address and an unsolicited NA to all-nodes (RFC 4861 §7.2.6,
// Override set) for each IPv6 address that is not tentative. send must not
// keep the frame after it returns.
func (r *Responder) Announce(send func(frame []byte) error) error {
	var buf [NDPFrameLen]byte
	for _, a := range r.addrs {
		var n int
		var err error
		if a.ip.Is4() {
			p := ARP{EthDst: Broadcast, EthSrc: r.mac, Op: ARPRequest, SenderMAC: r.mac, SenderIP: a.ip, TargetIP: a.ip}
			n, err = p.Marshal(buf[:])
		} else {
			if a.tentative.Load() {
				continue
			}
			na := NDP{EthDst: MulticastMAC(allNodes), EthSrc: r.mac, Src: a.ip, Dst: allNodes, Type: ICMPv6NA,
				Target: a.ip, Router: r.router, Override: true, HasLinkAddr: true, LinkAddr: r.mac}
			n, err = na.Marshal(buf[:])
		}
		if err != nil {
			return fmt.Errorf("announce %v: %w", a.ip, err)
		}
		if err := send(buf[:n]); err != nil {
			return fmt.Errorf("announce %v: %w", a.ip, err)
		}
	}
	return nil
}

// DAD runs duplicate address detection (RFC 4862 §5.4) for the tentative
// IPv6 addresses: it sends transmits neighbour solicitations for each (from
// the unspecified address to its solicited-node group, no source
// link-layer option; RFC 4862 §5.4.2) retrans apart through send, waits
// retrans after the last (DupAddrDetectTransmits 1 and RetransTimer 1 s
// are the RFC defaults), and marks every address without a conflict
// preferred. Frames received meanwhile must reach Handle (that is where an
// NA for the address, or an NS from another prober, is seen), and the
// interface must already receive the solicited-node groups. It returns a
// *ConflictError naming the duplicate addresses, which stay tentative.
func (r *Responder) DAD(send func(frame []byte) error, transmits int, retrans time.Duration) error {
	if transmits <= 0 {
		transmits = 1
	}
	if retrans <= 0 {
		retrans = time.Second
	}
	var buf [NDPFrameLen]byte
	for i := 0; i < transmits; i++ {
		for _, a := range r.addrs {
			if !a.tentative.Load() {
				continue
			}
			ns := NDP{EthDst: MulticastMAC(a.snm), EthSrc: r.mac, Src: netip.IPv6Unspecified(), Dst: a.snm,
				Type: ICMPv6NS, Target: a.ip}
			n, err := ns.Marshal(buf[:])
			if err == nil {
				err = send(buf[:n])
			}
			if err != nil {
				return fmt.Errorf("dad probe for %v: %w", a.ip, err)
			}
		}
		time.Sleep(retrans)
	}
	var ce ConflictError
	for _, a := range r.addrs {
		if !a.tentative.Load() {
			continue
		}
		if a.conflict.Load() {
			for _, c := range r.Conflicts() {
				if c.Addr == a.ip {
					ce.Conflicts = append(ce.Conflicts, c)
					break
				}
			}
			continue
		}
		a.tentative.Store(false)
	}
	if len(ce.Conflicts) > 0 {
		return &ce
	}
	return nil
}

// FrameProber is the Prober of owned mode: it builds ARP requests and
// neighbour solicitations (with our source link-layer address, RFC 4861
// §7.2.2) and hands them to Send. Its fields are read-only after first use.
type FrameProber struct {
	MAC MAC
	// Src4 is the sender address of ARP requests.
	Src4 netip.Addr
	// Src6LinkLocal and Src6 are the sources of solicitations for
	// link-local and other targets; either stands in for the other.
	Src6LinkLocal, Src6 netip.Addr
	// Send transmits one frame; it must not keep frame after it returns.
	// Called with the table's lock held: queue the frame, do not block.
	Send func(frame []byte)
	// Errors counts requests that could not be built (no source address).
	Errors atomic.Uint64
}

// errNoSource is counted when no source address fits a request.
var errNoSource = errors.New("arp: no source address for request")

// Probe implements Prober.
func (p *FrameProber) Probe(ip netip.Addr, mac MAC, unicast bool) {
	var buf [NDPFrameLen]byte
	n, err := p.build(buf[:], ip, mac, unicast)
	if err != nil {
		p.Errors.Add(1)
		return
	}
	p.Send(buf[:n])
}

func (p *FrameProber) build(b []byte, ip netip.Addr, mac MAC, unicast bool) (int, error) {
	if ip.Is4() {
		if !p.Src4.IsValid() {
			return 0, errNoSource
		}
		req := ARP{EthDst: Broadcast, EthSrc: p.MAC, Op: ARPRequest, SenderMAC: p.MAC, SenderIP: p.Src4, TargetIP: ip}
		if unicast {
			req.EthDst = mac
		}
		return req.Marshal(b)
	}
	src := p.Src6
	if ip.IsLinkLocalUnicast() && p.Src6LinkLocal.IsValid() || !src.IsValid() {
		src = p.Src6LinkLocal
	}
	if !src.IsValid() {
		return 0, errNoSource
	}
	ns := NDP{EthSrc: p.MAC, Src: src.WithZone(""), Type: ICMPv6NS, Target: ip.WithZone(""), HasLinkAddr: true, LinkAddr: p.MAC}
	if unicast {
		ns.Dst, ns.EthDst = ns.Target, mac
	} else {
		ns.Dst = SolicitedNode(ip)
		ns.EthDst = MulticastMAC(ns.Dst)
	}
	return ns.Marshal(b)
}

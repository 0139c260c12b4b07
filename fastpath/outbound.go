package fastpath

import (
	"encoding/binary"
	"github.com/wgpio/wgpio/chachapoly"
	"net/netip"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/protocol"
)

// usable returns the keypair and endpoint to send with, or nil.
func usable(p *Peer, now int64) (*Keypair, *Endpoint) {
	kp, ep := p.Current.Load(), p.Endpoint.Load()
	if !sendable(kp, ep, nil, now) {
		return nil, nil
	}
	return kp, ep
}

// sendable reports whether kp and ep, a peer's Current keypair and
// endpoint, may be used to send at now: a keypair confirmed, alive and
// younger than Reject-After-Time (whitepaper §5.4.6, §6.2), an endpoint
// with a resolved next hop. tmplEp is an endpoint that passed the check
// before (the one a peer's outer-header template was built for, or nil):
// an Endpoint is immutable, so ep == tmplEp passes without reading ep.
func sendable(kp *Keypair, ep, tmplEp *Endpoint, now int64) bool {
	if kp == nil || !kp.canSend(now) {
		return false
	}
	return ep != nil && (ep == tmplEp || ep.DstMAC != ([6]byte{}))
}

// outbound handles one burst from the LAN: classify, group by peer, seal,
// add outer headers, transmit on the WAN.
func (w *worker) outbound(now int64) int {
	n := w.lanRX.Receive(w.frames[:w.burst])
	if n == 0 {
		return 0
	}
	if c := w.capture.Load(); c != nil {
		c.put(w.id, CaptureLAN, CaptureRX, w.frames[:n])
	}
	w.outboundBurst(n, true, now)
	return n
}

// outboundBurst handles the n frames at w.frames[:n] as outbound's burst:
// Ethernet frames of the LAN's VLAN toward the tunnel. Besides the LAN's
// bursts (fromLAN) it takes the packets inbound turned back into the
// tunnel (hairpin.go), from the WAN RX pool: every frame it frees or holds
// goes back to its own pool (dataplane.RX.Free); an ICMPv6 neighbour
// solicitation or advertisement among them is a peer's packet for another
// peer, not the LAN's NDP, and is not handed to Config.LANNeighbours.
func (w *worker) outboundBurst(n int, fromLAN bool, now int64) {
	rt := w.e.routes.Load()
	frames := w.frames[:n]
	// Frame disposition as in inbound: a frame handed on (WAN TX batch,
	// held) is zeroed; frames left over at the end (drops, counted in bad,
	// and ARP/NDP frames once answered) are freed in one call.
	var bad [NumDropReasons]int32
	left := 0
	var (
		lastDst  netip.Addr // the last destination looked up, and its peer
		lastPeer *Peer
		lastID   uint // lastPeer's ID, as the route cache has it (metAt)
		extra    int  // fragments added at w.frames[n:]
		// the burst's peers, each once, in the order of their first frames
		peers = w.burstPeers[:0]
		// the burst's packets cut into fragments (interleaveFragments)
		runs = w.fwd.runs[:0]
	)
	// What the loops read of the configuration, loaded once per burst.
	lanNb, clamp, mtu := w.e.cfg.LANNeighbours, w.e.mss4 != 0, w.e.cfg.MTU
	if !fromLAN {
		lanNb = nil
	}
	// After a burst for many peers of a large table, this one's routes
	// are looked up ahead (routecache.go).
	ahead := w.lastPeers >= aheadMinPeers && rt.t.Size() >= aheadMinPrefixes
	if ahead {
		w.routeAhead(rt, frames)
	}
	routes := w.dstRoutes
	routes.use(rt) // for find4
	// Pass 1: parse, route, count per peer. Frames that leave the batch
	// get a nil peerOf.
	for i := range frames {
		w.peerOf[i] = nil
		f := &frames[i]
		// The frame's data, looked up once: the IP packet below is cut
		// from it.
		d := f.Data()
		if lanNb != nil {
			if l2 := neighbourL2(d, w.lanVLAN); l2 != 0 {
				w.neighbour(lanNb, w.lanTX, d, l2, w.lanVLAN)
				left++
				continue
			}
		}
		// The IP header is what a gateway judges; what follows it (even
		// an upper-layer header it cannot read) is the hosts' business.
		// A frame of another VLAN never enters the tunnel (vlan.go).
		r := header.Parse(d, &w.pkt)
		if !r.IPHeaderOK() || w.pkt.VLANID != w.lanVLAN {
			switch {
			case foreignVLAN(&w.pkt, w.lanVLAN):
				bad[DropVLAN]++
			case r == header.ReasonNotIP:
				bad[DropNotIP]++
			default:
				bad[DropMalformed]++
			}
			left++
			continue
		}
		// Addresses no router forwards (router.go), judged before the
		// route, as Linux's route input does.
		if ip := d[w.pkt.L3Off:]; routerWork && !(plainUnicast(ip) && optionsPlain(ip) && !rt.mayOwn(ip)) {
			if why, ok := transitChecks(rt, ip); !ok {
				if why, ok = w.refused(f, ip, why, fromLAN, now); !ok { // answered as Linux does (scope.go)
					bad[why]++
					left++
					continue
				}
			}
		}
		if w.pkt.Dst != lastDst { // a burst is mostly a few flows
			lastDst = w.pkt.Dst
			// IPv4: routeAhead's answer or a route cache hit, inline;
			// the rest through lookupDst (nil: no route).
			hit := false
			if lastDst.Is4() {
				b := lastDst.As4()
				k := binary.BigEndian.Uint32(b[:])
				if ahead && w.ahead[i].set != aheadOther && w.ahead[i].key == k {
					a := &w.ahead[i]
					lastPeer, lastID, hit = a.peer, uint(a.id), true
				} else {
					var id uint32
					lastPeer, id, hit = routes.find4(k)
					lastID = uint(id)
				}
			}
			if !hit {
				lastPeer, lastID = w.lookupDst(rt, lastDst, ahead, i)
				// No IPv6 in a tunnel below 1280 (ipv6_off): noPeer
				// answers it, the rare path, once per destination here.
				if lastDst.Is6() && w.e.no6() {
					lastPeer = nil
				}
			}
		}
		peer, ok := lastPeer, lastPeer != nil
		if !ok { // host unreachable (unreach.go)
			bad[w.noPeer(f, fromLAN, now)]++
			left++
			continue
		}
		ipLen := w.pkt.L3End - w.pkt.L3Off
		f.TrimFront(w.pkt.L3Off)
		f.SetLen(ipLen)
		// Forwarded as a router does (router.go): TTL or hop limit − 1,
		// or time exceeded to the sender.
		p := d[w.pkt.L3Off:w.pkt.L3End] // f.Data()
		if routerWork && !header.Forward(p) {
			w.icmpToLAN(f, w.pkt.L3Off, true, now)
			bad[DropTTLExceeded]++
			left++
			continue
		}
		if clamp {
			w.clampMSS(p)
		}
		pl := w.metAt(peer, lastID) // inline for a peer met before
		if pl == nil {
			pl = w.peerState(peer)
		}
		k := 0 // fragments added after this frame
		if ipLen > mtu {
			// IPv4 without DF is fragmented (RFC 791), each fragment
			// a transport message of its own; the rest get
			// "fragmentation needed" / "packet too big".
			k = -2
			if p[0]>>4 == header.IPv4Version && !header.IPv4(p).DontFragment() {
				k = w.fragment(f, pl, n+extra)
			}
			switch {
			case k > 0:
				extra += k
				runs = append(runs, fragRun{int32(i), int32(k)})
			case k == 0:
			case k == -1:
				bad[DropFragmentNoBuffer]++
				left++
				continue
			default:
				w.icmpToLAN(f, w.pkt.L3Off, false, now)
				bad[DropTooBig]++
				left++
				continue
			}
		}
		if pl.batchN == 0 {
			pl.slot = int16(len(peers))
			peers = append(peers, pl)
		}
		pl.batchN += int16(1 + k)
		// The source-port hash needs the inner 5-tuple; stash it in the
		// frame order: computed again in pass 2 from the packet itself.
		w.peerOf[i] = pl
	}
	// Fragments 1 and later of the burst's oversized packets follow it,
	// then go behind their packets' first.
	frames = w.frames[:n+extra]
	if extra > 0 {
		w.fwd.runs = runs
		w.interleaveFragments(n, extra)
	}
	w.lastPeers = len(peers)
	// Pass 2, per peer of the burst: the keypair and endpoint to send
	// with (kps and eps, by the peer's slot), and the counters for all
	// its frames (lease: one atomic add for several bursts of a peer
	// with a few frames each). After a burst
	// for many peers of a large table (ahead), the state of all the
	// burst's peers is loaded first (warm), so that their cache misses
	// overlap instead of coming one peer after another; the state of a
	// few thousand peers stays in cache, and there warm only costs
	// (BenchmarkPeers: 3 ns per packet with 1,000 peers), as did
	// prefetching the template there (docs/performance.md, 4 December).
	kps, eps := w.burstKP[:len(peers)], w.burstEP[:len(peers)]
	if ahead {
		w.warm(peers, kps, eps)
	}
	w.sendWith(peers, kps, eps, ahead, now)
	// Pass 3: pad each frame and queue it for sealing, in frame order.
	// The queues are filled in place: the entries of w.sealQ past the
	// burst are zero (cleared after every Seal), so only Key, Counter and
	// Data are written.
	q, qm := w.sealQ[:0], w.sealMeta[:0]
	for i := range frames {
		pl := w.peerOf[i]
		if pl == nil {
			continue
		}
		f := &frames[i]
		kp, ep := kps[pl.slot], eps[pl.slot]
		if kp == nil || pl.granted == 0 {
			if kp != nil {
				// Out of nonces: the control plane must rekey.
				bad[DropNonceExhausted]++
				left++
				w.ask(pl.peer, &pl.peer.HandshakeNeeded, true) // the control plane rekeys
				continue
			}
			if ep == nil && !pl.peer.Removed.Load() { // host unreachable (unreach.go)
				w.noEndpoint(f, fromLAN, now)
				bad[DropNoEndpoint]++
				left++
				continue
			}
			w.hold(pl, f, now) // takes the frame (keeps it, or drops and counts)
			*f = dataplane.Frame{}
			continue
		}
		if ahead && extra == 0 {
			// The keypair's address for the next burst's look-ahead
			// (routeCache.setHint), where the entry changed. (With
			// fragments frames moved: w.ahead is by the old order.)
			if a := &w.ahead[i]; a.set >= 0 && a.hint != addrOf(kp) {
				w.dstRoutes.setHint(a.set, a.key, addrOf(kp))
			}
		}
		if ep != pl.tmplEp && !ep.Src.IsValid() {
			// The WAN interface has no usable address of this family.
			// (The template's endpoint had one: it was built.)
			bad[DropNoWANAddress]++
			left++
			continue
		}
		inner := f.Len()
		data, padded, srcPort, ecn, ok := w.pad(f, pl)
		if !ok {
			bad[DropNoBuffer]++
			left++
			continue
		}
		k := len(q)
		if k < cap(q) && k < cap(qm) {
			q, qm = q[:k+1], qm[:k+1]
		} else {
			q, qm = append(q, chachapoly.Packet{}), append(qm, sealMeta{})
		}
		sp, sm := &q[k], &qm[k]
		sp.Key, sp.Counter, sp.Data = &kp.send, pl.nonce, data
		sm.frame, sm.inner, sm.padded, sm.srcPort, sm.ecn = int32(i), int32(inner), int32(padded), srcPort, ecn
		sm.c, sm.pl = pl.nonce, pl
		pl.nonce++
		pl.granted--
	}
	// One call seals the whole burst (package chachapoly: SIMD lanes).
	chachapoly.Seal(q)
	clear(q) // drop the key and buffer references
	out := w.out[:0]
	var encBytes uint64
	var enc int
	st := w.stamp(now) // before the loop: it may move the stamps' base
	for k := range qm {
		sm := &qm[k]
		f, pl := &frames[sm.frame], sm.pl
		if !w.wrap(f, pl, kps[pl.slot], eps[pl.slot], sm.c, sm.srcPort, int(sm.padded), sm.ecn) {
			bad[DropNoBuffer]++
			left++
			sm.pl = nil // not in out (notSent)
			continue
		}
		enc++
		encBytes += uint64(sm.inner)
		pl.sentAt = st
		if sm.inner > 0 {
			pl.dataSentAt = st
		}
		addTx(pl, protocol.TransportHeaderSize+int(sm.padded)+protocol.TagSize)
		w.markDirty(pl)
		out = append(out, *f)
		*f = dataplane.Frame{}
	}
	// Keep no keypair past the batch: one the control plane zeroes must
	// not stay reachable from an idle worker (key hygiene).
	clear(kps)
	clear(eps)
	clear(peers)
	clear(w.peerOf[:len(frames)])
	w.c.encrypted.Add(uint64(enc))
	w.c.encryptedBytes.Add(encBytes)
	w.freeRest(w.lanRX, frames, &bad, left)
	if sent := w.toWAN(out, true); sent < len(out) {
		notSent(qm, sent)
	}
	clear(qm) // drop the peerLocal references
}

// notSent takes back, from their peers' tx_bytes, the bytes of the
// messages the WAN port refused (its ring full: counted ring_full): those
// of qm (a burst's sealed messages in order, sm.pl nil for one not
// wrapped) past the first sent that went out. As wireguard-go and the
// kernel count a message when the socket took it, not when it was sealed
// (`wg show` said "sent" of messages that never left). Rare: the burst's
// loop pays nothing for it.
//
//go:noinline
func notSent(qm []sealMeta, sent int) {
	k := 0
	for i := range qm {
		sm := &qm[i]
		if sm.pl == nil {
			continue
		}
		if k >= sent {
			sm.pl.txBytes -= protocol.TransportHeaderSize + sm.padded + protocol.TagSize
		}
		k++
	}
}

// sendWith is outbound's pass 2 for the burst's peers (peers[j] the
// peer of slot j): it leaves in kps[j] and eps[j] the keypair and endpoint
// the peer sends with (kps[j] nil: none usable) and leases counters for
// its frames, and sets each peer's batchN back to 0; a peer's held frames
// (held.go) are sent here, before its burst's. With ahead, kps and
// eps hold the peers' Current and Endpoint already (warm loaded them);
// without, they are loaded here. (Without ahead the peers' state is in
// cache: prefetching their templates here, as before, only cost.) (A
// function of its own: in outbound's body, its loop's variables lived on
// the stack.)
func (w *worker) sendWith(peers []*peerLocal, kps []*Keypair, eps []*Endpoint, ahead bool, now int64) {
	kps, eps = kps[:len(peers)], eps[:len(peers)]
	for j, pl := range peers {
		kp, ep := kps[j], eps[j]
		if !ahead {
			p := pl.peer
			kp, ep = p.Current.Load(), p.Endpoint.Load()
			eps[j] = ep
		}
		if !sendable(kp, ep, pl.tmplEp, now) {
			kp = nil
		} else {
			if w.heldTotal > 0 && len(pl.held) > 0 && !pl.peer.Removed.Load() {
				// Frames held for the session go first, as
				// Linux's WireGuard and wireguard-go send their
				// staged packets before a newer one: the turn's
				// flushHeld, after this burst, would send them
				// after it.
				w.sendHeld(pl, kp, ep, now)
			}
			if !pl.leased(kp) {
				pl.lease(kp)
			}
		}
		kps[j] = kp
		pl.batchN = 0
	}
}

// warm loads, for each peer of an outbound burst (peers[j]), the keypair
// and endpoint it sends with into kps[j] and eps[j] (its Current and
// Endpoint, for sendWith), and prefetches the cache lines that pass 2,
// Seal and wrap use: the keypair's send line (counter, index, key, its
// state for senders), the peerLocal's template line for a peer whose
// outer headers the worker's shared source does not write (outersrc.go;
// routeAhead prefetched its first line, with the lease, the stamps and
// the destination of the others), and the endpoint when the headers were
// not built for it. The prefetches of
// different peers do not depend on each other and do not wait to retire,
// so the processor has the misses of the whole burst in flight at once;
// with traffic for thousands of peers, a peer's state is rarely in cache
// when its next burst comes, and taken one peer after another (each with
// an atomic add that waits for its line) the misses would add up one
// after another.
func (w *worker) warm(peers []*peerLocal, kps []*Keypair, eps []*Endpoint) {
	kps, eps = kps[:len(peers)], eps[:len(peers)]
	lines := w.in.lines[:3*len(peers)] // the look-ahead's scratch (inahead.go), free outside inbound
	n := 0
	for j, pl := range peers {
		p := pl.peer
		kp, ep := p.Current.Load(), p.Endpoint.Load()
		kps[j], eps[j] = kp, ep
		if kp != nil {
			lines[n] = addrOf(kp)
			n++
		}
		// A peer's own template (an IPv4 one is one line), if it has
		// one. (When routeAhead prefetched it too, before pass 1, again
		// here paid: BenchmarkManyPeers -manyevict 32 med-many/1
		// 0.85-0.87 with, 0.83-0.84 without, 3 alternating rounds,
		// probably because a prefetch issued while the fill buffers are
		// full of a level's misses can be dropped.)
		if pl.srcGen == 0 {
			lines[n] = addrOf(&pl.tmpl)
			n++
		}
		if ep != nil && ep != pl.tmplEp {
			lines[n] = addrOf(ep)
			n++
		}
	}
	prefetchAhead(lines[:n])
}

// A worker reserves a peer's send counters at least leaseMin at a time
// and keeps what a burst left for the next (peerLocal.nonce, granted): a
// burst for 64 peers with a frame each takes one atomic add on the
// keypair's counter for every leaseMin of them, not one per peer (locked
// instructions, each waiting for the stores before it: some 5 ns per
// packet in BenchmarkPeers). The counters stay unique (each comes from
// one ReserveNonces) and rise in the order one worker sends them. Those
// of a lease that is dropped (another keypair, or too far behind) are
// never sent, as a lost packet's. A lease is dropped once the keypair's
// counter ran more than leaseLag past its next counter (other queues
// sent): the counters it would send then are at most leaseLag behind
// the newest, inside any receiver's replay window with room to spare for
// what the other queues send while the message is in flight (8,128 in
// wireguard-go, the kernel and package replay, but 1,024 in boringtun,
// which drops a counter more than 1,024 below the newest it received:
// leaseLag at 1,024 was right at that edge), so a lease never turns
// into packets a peer rejects as replays. Rekey-After-Messages and
// Reject-After-Messages count what is reserved (whitepaper §6.1), at
// most leaseMin-1 per worker ahead of what was sent.
const (
	leaseMin = 16
	leaseLag = 256
)

// leased reports whether pl's lease holds counters of kp for the batchN
// frames of its burst, and is not too far behind (lease's common case,
// small enough to be inlined in outbound's loop over a burst's peers).
func (pl *peerLocal) leased(kp *Keypair) bool {
	return kp.serial != 0 && pl.leaseOf == kp.serial && pl.granted >= pl.batchN && kp.sendNonce.Load()-pl.nonce <= leaseLag
}

// lease makes pl's lease hold counters of kp, pl's usable keypair, for the
// batchN frames of its burst: the lease it holds when that is of kp,
// holds as many and is not too far behind, otherwise a new one of
// max(batchN, leaseMin) counters (fewer, or none, at Reject-After-Messages:
// granted then says how many). The lease names kp by its serial, never a
// pointer (a worker keeps no keypair past a burst).
func (pl *peerLocal) lease(kp *Keypair) {
	if pl.leased(kp) {
		return
	}
	first, granted := kp.ReserveNonces(max(int(pl.batchN), leaseMin))
	pl.nonce, pl.granted, pl.leaseOf = first, int16(granted), kp.serial
}

func (w *worker) outerLen(ep *Endpoint) int {
	// An IPv4-mapped Dst is sent as IPv4 (wrap's template unmaps it).
	if ep.Dst.Addr().Unmap().Is4() {
		return w.wanL2 + header.IPv4MinLen + header.UDPLen
	}
	return w.wanL2 + header.IPv6Len + header.UDPLen
}

// sealMeta is what outbound keeps of a frame queued for sealing, to wrap it
// once the burst is sealed.
type sealMeta struct {
	frame, inner, padded int32
	srcPort              uint16
	ecn                  uint8 // outer ECN field (router.go)
	c                    uint64
	pl                   *peerLocal
}

// pad prepares the IP packet in f (data = the inner packet) for sealing:
// zero padding to a multiple of 16 (whitepaper §5.4.6), never past the MTU,
// and room for the tag, so that f.Data() is plaintext ‖ 16 bytes. It
// returns that data (f.Data()), the padded length, the outer source port
// (hashed from the inner 5-tuple) and the outer ECN field (from the inner
// one: router.go), both read before sealing, or ok = false without
// tailroom.
func (w *worker) pad(f *dataplane.Frame, pl *peerLocal) (data []byte, padded int, srcPort uint16, ecn uint8, ok bool) {
	// The inner packet, its capacity to the end of the chunk: one slice
	// for everything pad reads and writes.
	d := f.Data()
	plen := len(d)
	padded = (plen + 15) &^ 15
	if padded > w.e.cfg.MTU {
		padded = max(plen, w.e.cfg.MTU)
	}
	// Inner 5-tuple hash for the source port, read before sealing.
	srcPort = pl.peer.SrcPortBase
	if srcPort == 0 {
		srcPort = w.wan.port
	}
	if pl.peer.SrcPorts > 1 {
		srcPort += uint16(flowHash(d) % uint32(pl.peer.SrcPorts))
	}
	if routerWork && plen > 0 {
		ecn = header.EncapECN(header.ECN(d))
	}
	if f.Tailroom() < padded-plen+protocol.TagSize {
		return nil, 0, 0, 0, false
	}
	f.SetLen(padded + protocol.TagSize)
	clear(d[plen:padded])
	return d[:padded+protocol.TagSize], padded, srcPort, ecn, true
}

// wrap puts the transport header (counter c of kp), UDP, IP (ECN field
// ecn) and Ethernet toward ep in front of the sealed message in f (padded
// bytes of ciphertext, then the tag); kp and ep are what pl's peer sends
// with.
func (w *worker) wrap(f *dataplane.Frame, pl *peerLocal, kp *Keypair, ep *Endpoint, c uint64, srcPort uint16, padded int, ecn uint8) bool {
	// Outer headers from the worker's shared source and the peer's
	// destination, or from the peer's own template (outersrc.go), built
	// again when the endpoint changed or the source the peer's were
	// built with was replaced: one copy and a few length and checksum
	// patches.
	if pl.tmplEp != ep || pl.srcGen != w.srcGen && pl.srcGen != 0 {
		if !w.buildOuter(pl, ep) {
			return false
		}
	}
	outer := header.EthernetLen + header.IPv4MinLen + header.UDPLen
	if pl.srcGen == 0 {
		outer = pl.tmpl.Len()
	}
	b := f.Prepend(outer + protocol.TransportHeaderSize)
	if b == nil {
		return false
	}
	t := b[outer:]
	t[0], t[1], t[2], t[3] = protocol.TypeTransport, 0, 0, 0
	binary.LittleEndian.PutUint32(t[4:8], kp.RemoteIndex)
	binary.LittleEndian.PutUint64(t[8:16], c)
	payload := protocol.TransportHeaderSize + padded + protocol.TagSize
	if pl.srcGen != 0 {
		// The usual outer headers (untagged IPv4): with the
		// identification and the ECN field in the one checksum.
		w.ipID += w.ipStep
		w.src.Put(b, &pl.dst, srcPort, payload, w.ipID, ecn)
		return true
	}
	if pl.tmpl.PutIPv4With(b, srcPort, payload, w.ipID+w.ipStep, ecn) {
		// As above, for a peer whose source is not the shared one.
		w.ipID += w.ipStep
		return true
	}
	pl.tmpl.Put(b, srcPort, payload)
	if l3 := pl.tmpl.IPOffset(); b[l3]>>4 == 4 {
		// A fresh IPv4 identification per packet (RFC 6864: the outer
		// datagram may be fragmented on the way, DF being clear), and
		// the ECN field, with one checksum update.
		w.ipID += w.ipStep
		putOuterIPv4(b, l3, w.ipID, ecn)
	} else if ecn != 0 {
		putOuterIPv6ECN(b, l3, ecn)
	}
	return true
}

// flowHash hashes the inner IP packet's 5-tuple (addresses, protocol and,
// for TCP/UDP of unfragmented packets, ports) so that one inner flow always
// takes one outer source port.
func flowHash(p []byte) uint32 {
	var h uint64 = 0x9e3779b97f4a7c15
	var proto uint8
	var l4 []byte
	switch {
	case len(p) >= header.IPv4MinLen && p[0]>>4 == 4:
		h ^= uint64(binary.BigEndian.Uint32(p[12:16]))<<32 | uint64(binary.BigEndian.Uint32(p[16:20]))
		proto = p[9]
		ihl := int(p[0]&0x0f) * 4
		if binary.BigEndian.Uint16(p[6:8])&0x3fff == 0 && len(p) >= ihl+4 {
			l4 = p[ihl:]
		}
	case len(p) >= header.IPv6Len:
		h ^= binary.BigEndian.Uint64(p[8:16]) ^ binary.BigEndian.Uint64(p[16:24])*0xff51afd7ed558ccd
		h ^= binary.BigEndian.Uint64(p[24:32])*0xc4ceb9fe1a85ec53 ^ binary.BigEndian.Uint64(p[32:40])
		proto = p[6]
		if len(p) >= header.IPv6Len+4 {
			l4 = p[header.IPv6Len:]
		}
	}
	if proto == header.ProtoTCP || proto == header.ProtoUDP {
		if l4 != nil {
			h ^= uint64(binary.BigEndian.Uint32(l4[0:4])) << 7
		}
	}
	h ^= uint64(proto) << 56
	// splitmix64 finaliser
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return uint32(h)
}

// seal pads, seals (counter c of kp) and wraps one frame toward ep: for the
// paths that send a frame at a time (held packets, the control plane's
// inner packets); outbound seals its bursts in one call.
func (w *worker) seal(f *dataplane.Frame, pl *peerLocal, kp *Keypair, ep *Endpoint, c uint64) bool {
	data, padded, srcPort, ecn, ok := w.pad(f, pl)
	if !ok {
		return false
	}
	q := w.sealQ[:1]
	q[0] = chachapoly.Packet{Key: &kp.send, Counter: c, Data: data}
	chachapoly.Seal(q)
	q[0] = chachapoly.Packet{}
	return w.wrap(f, pl, kp, ep, c, srcPort, padded, ecn)
}

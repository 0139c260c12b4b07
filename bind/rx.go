package bind

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.zx2c4.com/wireguard/conn"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/counts"
	"github.com/wgpio/wgpio/protocol"
)

// DropReason says why the Bind dropped a frame or a datagram.
type DropReason uint8

// Drop reasons. Frames header.Parse rejects count as DropMalformed, and
// by header.Reason in Stats.Parse.
const (
	// DropMalformed: header.Parse rejected the frame (runt, bad IP or UDP
	// length, bad IPv4 header checksum, zero UDP checksum on IPv6, ...).
	DropMalformed DropReason = iota
	// DropNotIP: neither IP nor, in owned mode, ARP/NDP for us.
	DropNotIP
	// DropNeighbour: an ARP/NDP frame the Responder refused.
	DropNeighbour
	// DropNotUDP: IP, but not UDP.
	DropNotUDP
	// DropFragment: an IP fragment on the port. The Bind does not
	// reassemble: the XDP filter (XDPFilter) leaves fragments to the
	// kernel, which reassembles them, and a kernel socket on the Bind's
	// address and port hands the datagram to ReceiveKernel (a gateway's:
	// internal/kernelsock); a port without such a filter hands them over,
	// and they are counted here.
	DropFragment
	// DropNotOurs: UDP to another address or port.
	DropNotOurs
	// DropBadChecksum: the UDP checksum failed (Config.VerifyChecksum).
	DropBadChecksum
	// DropTooBig: a datagram longer than the receive buffer; on send one
	// that cannot be sent at all: longer than a frame holds, or, longer
	// than the port's MTU, one that cannot be fragmented (an MTU with no
	// room for the IP header and 8 bytes of data, or more than 64
	// fragments); a frame of SendFrame longer than a frame holds. A
	// datagram over the MTU is otherwise sent as fragments
	// (Stats.Fragmented).
	DropTooBig
	// DropNoWANRoute: Send found no route to the endpoint out of the
	// port's interface (Config.Routes: none, or an unreachable, blackhole
	// or prohibit route), as the fast path's DropNoWANRoute; a route whose
	// next hop does not answer is DropNoNeighbour.
	DropNoWANRoute
	// DropNoNeighbour: Send's next hop did not resolve.
	DropNoNeighbour
	// DropNoBuffer: the pool had no free frame: for a datagram of a
	// batch, or for one of the fragments of a datagram over the MTU
	// (the datagram then dropped whole).
	DropNoBuffer
	// DropTXFull: the TX ring stayed full (for a fragmented datagram:
	// for one of its fragments at least).
	DropTXFull
	// DropVLAN: a frame with an 802.1Q tag of a VLAN other than 0 (a
	// priority tag), or an 802.1ad tag: another VLAN's traffic, never
	// WireGuard for us (the XDP program leaves such frames to the kernel;
	// a port without one hands them over).
	DropVLAN
	// DropLinkDown: a datagram the kernel dropped after Send put it on
	// the TX ring, for a WAN without carrier (the port's
	// dataplane.DropLinkDown, which Stats reads; TXPackets counted it).
	// The port counts frames: each fragment of a fragmented datagram.
	DropLinkDown
	// DropDriver: a datagram the WAN's driver dropped after Send put it
	// on the TX ring, with the link up (the port's dataplane.DropDriver,
	// which Stats reads; TXPackets counted it). Frames, as DropLinkDown.
	DropDriver
	// DropNoWANAddress: Send had no address of the endpoint's family to
	// send from (the WAN has none: ErrNoAddress), as the fast path's
	// DropNoWANAddress.
	DropNoWANAddress
	// DropBadType, DropShortData, DropWrongSize: with Config.Screen, a
	// datagram that is no WireGuard message (screen): an unknown type or
	// reserved bytes not zero, transport data shorter than 32 bytes, a
	// handshake message of the wrong size. The first two are the fast
	// path's names; the third its handshake_invalid's detail.
	DropBadType
	DropShortData
	DropWrongSize
	// DropKernelQueueFull: a datagram of ReceiveKernel (one that reached
	// the WAN outside the port: reassembled from IP fragments) found its
	// queue full (KernelQueueLen): wireguard-go did not keep up.
	DropKernelQueueFull
	// DropKernelSocketFull: datagrams that the host kernel dropped at the
	// socket that hands them to ReceiveKernel (a gateway's:
	// internal/kernelsock), chiefly for its receive buffer full while its
	// reader lagged (the kernel's UdpRcvbufErrors or Udp6RcvbufErrors):
	// the Bind never saw them. The socket's owner reports its count
	// (CountKernelSocketDrops), which Stats adds.
	DropKernelSocketFull
	// DropMartian: a datagram to us from a source that Linux's IP input
	// drops before any socket sees it (header.MartianSource: 0.0.0.0/8,
	// 127.0.0.0/8, multicast, 255.255.255.255, ::1, IPv4-mapped IPv6;
	// and ::): never a peer's, and wireguard-go's answer (a cookie reply,
	// a roamed endpoint) would go nowhere or to a spoofed victim.
	DropMartian

	NumDropReasons
)

// DropNoRoute is DropNoWANRoute's former name.
//
// Deprecated: use DropNoWANRoute (counted as "no_wan_route", formerly
// "no_route", which the gateways' LAN side uses for a packet to no
// peer's allowed IPs).
const DropNoRoute = DropNoWANRoute

var dropNames = [NumDropReasons]string{
	DropMalformed:    "malformed",
	DropNotIP:        "not_ip",
	DropNeighbour:    "neighbour",
	DropNotUDP:       "not_udp",
	DropFragment:     "fragment",
	DropNotOurs:      "not_ours",
	DropBadChecksum:  "bad_checksum",
	DropTooBig:       "too_big",
	DropNoWANRoute:   "no_wan_route",
	DropNoNeighbour:  "no_neighbour",
	DropNoBuffer:     "no_buffer",
	DropTXFull:       "tx_full",
	DropVLAN:         "vlan",
	DropLinkDown:     "link_down",
	DropDriver:       "driver_drop",
	DropNoWANAddress: "no_wan_address",
	DropBadType:      "bad_type",
	DropShortData:    "short_data",
	DropWrongSize:    "wrong_size",

	DropKernelQueueFull:  "kernel_queue_full",
	DropKernelSocketFull: "kernel_socket_full",
	DropMartian:          "martian",
}

// String returns the reason's snake-case name.
func (r DropReason) String() string { return counts.Name(dropNames[:], r) }

const _ = counts.MaxReasons - NumDropReasons // at most MaxReasons reasons

// Stats are the Bind's counters since New.
type Stats struct {
	RXPackets uint64 `json:"rx_packets"` // datagrams handed to wireguard-go
	// FromKernel counts the datagrams among RXPackets that reached the
	// WAN outside the port, through a kernel socket (Bind.ReceiveKernel):
	// the ones peers sent as IP fragments, which the kernel reassembled.
	FromKernel uint64 `json:"from_kernel"`
	// TXPackets counts datagrams transmitted: whole, or as every one of
	// their fragments.
	TXPackets uint64 `json:"tx_packets"`
	// Fragmented counts the datagrams among TXPackets that were longer
	// than the port's MTU and went as IP fragments (IPv4 fragments, or
	// IPv6 ones with a Fragment header), as the kernel fragments the
	// outer packets of Linux's WireGuard; Fragments counts the fragment
	// frames transmitted (those of a datagram the TX ring took only in
	// part too, which is then a DropTXFull).
	Fragmented uint64 `json:"fragmented"`
	Fragments  uint64 `json:"fragments"`
	// Drops counts dropped frames (receive) and datagrams (send) by reason.
	Drops DropCounts `json:"drops"`
	// Parse breaks DropMalformed down by header.Reason.
	Parse header.ReasonCounts `json:"parse"`
	// NeighbourReplies counts ARP/NDP answers sent (owned mode).
	NeighbourReplies uint64 `json:"neighbour_replies"`
}

// Stats returns a snapshot of the counters. Safe for concurrent use.
func (b *Bind) Stats() Stats {
	var s Stats
	b.mu.Lock()
	s.Drops = b.stat.rx
	s.Parse = b.stat.rp
	s.RXPackets = b.stat.n
	s.FromKernel = b.stat.k
	s.NeighbourReplies = b.stat.nr
	if b.gen != nil {
		for _, r := range b.gen.rxs {
			r.ctr.drops.LoadAdd(&s.Drops)
			r.ctr.parse.LoadAdd(&s.Parse)
			s.RXPackets += r.ctr.packets.Load()
			s.FromKernel += r.ctr.fromKernel.Load()
			s.NeighbourReplies += r.ctr.replies.Load()
		}
	}
	b.mu.Unlock()
	b.kq.drops.LoadAdd(&s.Drops)
	for _, q := range b.txqs {
		s.TXPackets += q.ctr.packets.Load()
		s.Fragmented += q.ctr.fragmented.Load()
		s.Fragments += q.ctr.fragments.Load()
		q.ctr.drops.LoadAdd(&s.Drops)
	}
	for i := range b.cfg.Port.NumQueues() {
		st := b.cfg.Port.Queue(i).Stats()
		s.Drops[DropLinkDown] += st.Drops[dataplane.DropLinkDown]
		s.Drops[DropDriver] += st.Drops[dataplane.DropDriver]
	}
	if f := b.kernelDrops.Load(); f != nil {
		s.Drops[DropKernelSocketFull] += (*f)()
	}
	return s
}

// rxQueue is one queue's receive side for one generation. Everything but
// the counters belongs to the goroutine inside receive, which holds mu for
// the whole call (taken once per call: Close takes it to wait for the
// goroutine to leave).
type rxQueue struct {
	b  *Bind
	g  *generation
	rx dataplane.RX
	w  *dataplane.Waiter

	mu     sync.Mutex
	spin   dataplane.Spinner // receive's idle spin
	frames []dataplane.Frame
	eps    map[epKey]*Endpoint
	// last is the source of the previous datagram, the local address it
	// was sent to, and their endpoint: a peer's datagrams come in runs,
	// which then cost two comparisons each instead of a map lookup.
	lastSrc   netip.AddrPort
	lastLocal netip.Addr
	lastEP    *Endpoint
	pkt       header.Packet
	local     *localAddrs // the Bind's addresses, loaded once per burst
	reply     []byte
	warm      byte // what dataplane.Warm returned, kept so its loads stay
	// kernel are ReceiveKernel's datagrams for this queue (kernel.go).
	kernel chan *kernelSlot

	ctr struct {
		packets    atomic.Uint64
		fromKernel atomic.Uint64 // of packets, ReceiveKernel's
		replies    atomic.Uint64
		drops      counts.Atomic[DropReason]
		parse      counts.Atomic[header.Reason]
	}
}

// receive is the queue's conn.ReceiveFunc: it waits until at least one
// datagram for us arrives (polling again, yielding to other goroutines,
// for an adaptive spin of at most dataplane.DefaultSpin, then blocking in
// poll(2): see dataplane.Spinner), copies up to len(packets) payloads into
// packets[i][:sizes[i]] with their sources in eps[i], and returns how many.
// The frames are given back to the queue before it returns; packets stay
// the caller's. After Close it returns net.ErrClosed. Given no room
// (packets, sizes or eps empty) it returns 0 and nil at once and receives
// nothing, as io.Reader's Read of an empty buffer (before, it blocked for
// good). It allocates only to cache an endpoint for a new source address and port.
func (r *rxQueue) receive(packets [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	want := min(len(packets), len(sizes), len(eps), len(r.frames))
	if want == 0 {
		if r.g.closed.Load() {
			return 0, net.ErrClosed
		}
		return 0, nil
	}
	spinning, spinStart := false, time.Time{}
	parks := r.w.Parks()
	for {
		if r.g.closed.Load() {
			return 0, net.ErrClosed
		}
		m := r.rx.Receive(r.frames[:want])
		r.warm ^= dataplane.Warm(r.frames[:m])
		r.local = r.b.local.Load()
		n := 0
		for i := range m {
			if r.handle(r.frames[i].Data(), packets[n], &sizes[n], &eps[n]) {
				n++
			}
		}
		r.rx.Free(r.frames[:m])
		clear(r.frames[:m])
		if len(r.kernel) > 0 {
			n = r.takeKernel(packets, sizes, eps, n, want)
		}
		if n > 0 {
			if spinning && !parks {
				r.spin.Hit(int64(time.Since(spinStart)))
			}
			r.ctr.packets.Add(uint64(n))
			return n, nil
		}
		if m > 0 {
			continue
		}
		// Nothing: poll again, yielding to other goroutines, for the
		// spinner's budget, then block in the waiter. A waiter that
		// parks the goroutine (memport) costs about what one yield
		// does: yield once, then block, and read no clock (a read
		// costs 50-100 ns in a virtual machine, kvm-clock).
		switch {
		case !spinning:
			spinning = true
			if !parks {
				spinStart = time.Now()
			}
		case parks || int64(time.Since(spinStart)) >= r.spin.Budget():
			r.spin.Miss()
			spinning = false
			if _, err := r.w.Wait(dataplane.Forever); err != nil {
				if r.g.closed.Load() {
					return 0, net.ErrClosed
				}
				return 0, fmt.Errorf("bind: wait: %w", err)
			}
			continue
		}
		runtime.Gosched()
	}
}

// handle takes one received frame; if it carries a datagram for us it
// copies the payload into buf and reports true.
func (r *rxQueue) handle(frame, buf []byte, size *int, ep *conn.Endpoint) bool {
	b := r.b
	p := &r.pkt
	switch rs := header.Parse(frame, p); rs {
	case header.OK:
		if p.VLANID != 0 {
			r.ctr.drops[DropVLAN].Add(1)
			return false
		}
	case header.ReasonNotIP:
		// Another VLAN's ARP as much as its IP: only untagged and
		// priority-tagged (VLAN 0) frames are the WAN's.
		if p.EtherType == header.EtherTypeQinQ || p.EtherType == header.EtherTypeVLAN || p.VLANID != 0 {
			r.ctr.drops[DropVLAN].Add(1)
			return false
		}
		r.neighbour(frame)
		return false
	case header.ReasonFragment:
		r.ctr.drops[DropFragment].Add(1)
		return false
	default:
		r.ctr.drops[DropMalformed].Add(1)
		r.ctr.parse[rs].Add(1)
		return false
	}
	if p.Proto != header.ProtoUDP {
		if p.IPVersion == 6 && p.Proto == header.ProtoICMPv6 && b.cfg.Responder != nil {
			r.neighbour(frame)
			return false
		}
		r.ctr.drops[DropNotUDP].Add(1)
		return false
	}
	dst := p.Dst
	if p.DstPort != r.g.port || (dst != r.local.v4 && dst != r.local.v6 && !r.local.has(dst)) {
		r.ctr.drops[DropNotOurs].Add(1)
		return false
	}
	if ip := frame[p.L3Off:]; !header.PlainUnicast(ip) && header.MartianSource(ip) {
		r.ctr.drops[DropMartian].Add(1)
		return false
	}
	u := header.UDP(frame[p.L4Off:p.L3End])
	if b.cfg.VerifyChecksum && !(p.IPVersion == 4 && u.Checksum() == 0) {
		var ps uint32
		if p.IPVersion == 4 {
			h := frame[p.L3Off:]
			ps = header.PseudoHeaderChecksumBytes(header.ProtoUDP, h[12:16], h[16:20], u.Length())
		} else {
			h := frame[p.L3Off:]
			ps = header.PseudoHeaderChecksumBytes(header.ProtoUDP, h[8:24], h[24:40], u.Length())
		}
		if !u.VerifyChecksum(ps) {
			r.ctr.drops[DropBadChecksum].Add(1)
			return false
		}
	}
	payload := frame[p.PayloadOff : p.PayloadOff+p.PayloadLen]
	if len(payload) > len(buf) {
		r.ctr.drops[DropTooBig].Add(1)
		return false
	}
	if b.cfg.Screen {
		if why, ok := screen(payload); !ok {
			r.ctr.drops[why].Add(1)
			return false
		}
	}
	*size = copy(buf, payload)
	*ep = r.endpoint(netip.AddrPortFrom(p.Src, p.SrcPort), dst)
	return true
}

// screen reports whether the UDP payload msg is a WireGuard message
// stock wireguard-go takes, or why not (Config.Screen).
func screen(msg []byte) (DropReason, bool) {
	if len(msg) < 4 {
		return DropBadType, false
	}
	size := 0
	switch binary.LittleEndian.Uint32(msg) {
	case protocol.TypeTransport:
		if len(msg) < protocol.TransportMinSize {
			return DropShortData, false
		}
		return 0, true
	case protocol.TypeInitiation:
		size = protocol.InitiationSize
	case protocol.TypeResponse:
		size = protocol.ResponseSize
	case protocol.TypeCookieReply:
		size = protocol.CookieReplySize
	default:
		return DropBadType, false
	}
	if len(msg) != size {
		return DropWrongSize, false
	}
	return 0, true
}

// endpoint returns the cached endpoint for src whose datagram was sent to
// local, making one on a miss.
func (r *rxQueue) endpoint(src netip.AddrPort, local netip.Addr) *Endpoint {
	if r.lastEP != nil && src == r.lastSrc && local == r.lastLocal {
		return r.lastEP
	}
	k := epKey{src, local}
	e, ok := r.eps[k]
	if !ok {
		if len(r.eps) >= maxEndpoints {
			clear(r.eps)
		}
		e = r.b.newEndpoint(src, local)
		r.eps[k] = e
	}
	r.lastSrc, r.lastLocal, r.lastEP = src, local, e
	return e
}

// neighbour hands an ARP or NDP frame to the Responder (owned mode) and
// sends its answer; without a Responder the frame is counted as not IP.
func (r *rxQueue) neighbour(frame []byte) {
	rsp := r.b.cfg.Responder
	if rsp == nil {
		r.ctr.drops[DropNotIP].Add(1)
		return
	}
	n, rs := rsp.Handle(frame, r.reply)
	switch {
	case n > 0:
		if r.b.SendFrame(r.reply[:n]) == nil {
			r.ctr.replies.Add(1)
		}
	case rs == arp.ReasonNone:
	case rs == arp.ReasonNotNeighbour:
		r.ctr.drops[DropNotIP].Add(1)
	default:
		r.ctr.drops[DropNeighbour].Add(1)
	}
}

// DropCounts counts drops by reason, indexed by DropReason. In JSON it is
// an object of the nonzero counts by reason name, which UnmarshalJSON reads
// back; an unknown name is an error. Its methods (those of
// internal/counts.Counts, which go doc does not list): List gives the
// nonzero counts as sorted "reason=count" strings (print that: %v prints
// the whole array), Total their sum, Add adds another's.
type DropCounts = counts.Counts[DropReason]

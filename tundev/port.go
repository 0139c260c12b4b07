package tundev

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gaissmai/bart"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/tun"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/internal/icmprate"
)

// PortBatchSize is the PortDevice's batch size: wireguard-go's
// conn.IdealBatchSize, within a queue's burst (dataplane.MaxBurst).
const PortBatchSize = min(conn.IdealBatchSize, dataplane.MaxBurst)

// DefaultResolveWait is how long Write waits for a next hop's MAC before
// it drops the packets to it (PortConfig.ResolveWait).
const DefaultResolveWait = time.Second

// PortConfig configures a PortDevice.
type PortConfig struct {
	// Port is the LAN port: its XDP filter redirects the frames to route
	// into the tunnel (afxdp.Filter.Prefixes with the peers' allowed IPs,
	// HostAddrs with the LAN addresses). The device uses every queue and
	// does not close the port.
	Port dataplane.Port
	// Name is what Name returns (default the port's name).
	Name string
	// MTU is what MTU returns, the largest plaintext packet in bytes
	// (0: the port's MTU; negative: an error): the tunnel MTU. Read enforces it as a
	// router in front of the tunnel would (mtu.go): a larger IPv4 packet
	// without DF is fragmented (RFC 791), a larger IPv4 packet with DF or
	// IPv6 packet is dropped and answered with "fragmentation needed" or
	// "packet too big" carrying MTU. Write holds a decrypted packet
	// routed back into the tunnel (peer to peer) to it the same way
	// (lanmtu.go), and one to the LAN to the LAN's MTU (the port's, then
	// SetLANMTU's).
	MTU int
	// ICMPSource4 and ICMPSource6 are the source addresses of those
	// answers: the gateway's address on the LAN, from the configuration
	// or the LAN interface, as Linux answers from the address of the
	// interface the answer leaves by (PortDevice.SetICMPSources replaces
	// them when the interface's addresses change). Without one, oversized
	// packets of that family are dropped (counted over_mtu) with no answer.
	ICMPSource4, ICMPSource6 netip.Addr
	// ICMPLinkLocal6 is the gateway's IPv6 link-local address on the LAN
	// (fe80::/10; another is taken for none): the source of the ICMPv6
	// errors to a LAN host's link-local address, as Linux's source
	// address selection picks the interface's address of the
	// destination's scope (RFC 6724 §5 rule 2). Invalid: ICMPSource6.
	// PortDevice.SetICMPLinkLocal replaces it.
	ICMPLinkLocal6 netip.Addr
	// Routes gives the route towards a packet's destination
	// (arp.KernelRoutes in shared mode, arp.StaticRoutes in owned mode):
	// its next hop on the LAN, and the prefix a peer's allowed IPs are
	// weighed against (router.go). Write takes its Table once per call.
	// Without LANIndex the interface index of a route is not checked:
	// Routes holds the LAN's routes alone.
	Routes arp.RouteView
	// LANIndex is the LAN interface's index among Routes' routes. Set,
	// Routes is the host's whole route view (gateway/compatgw: the
	// kernel's main table, as gateway/fastgw follows it), and a decrypted
	// packet whose route leads out of another interface (a full tunnel's
	// Internet traffic, a network the host reaches by another link), sends
	// nowhere (unreachable, blackhole, prohibit: IfIndex -1) or is not
	// covered by any route (the host's ip rules may route it by another
	// table) is dropped as PortDropOffLAN, never sent to the LAN: the
	// device has no way to hand it to the host, whose kernel would
	// forward it (router.go). 0: every route leads to the LAN.
	LANIndex int
	// Neighbours holds the next hops' MACs.
	Neighbours *arp.Table
	// Responder, in owned mode, answers ARP and NDP for the LAN addresses
	// (the XDP filter must redirect them: afxdp.Filter.Neighbours). Nil in
	// shared mode, where the kernel answers.
	Responder *arp.Responder
	// ResolveWait bounds how long Write waits for a next hop (default
	// DefaultResolveWait).
	ResolveWait time.Duration
	// TunnelSource4 and TunnelSource6 are the sources of the time exceeded
	// errors that answer decrypted packets, into the tunnel: our tunnel
	// address of the family, as Linux answers from the address of the
	// interface the error leaves by (wg0's). Invalid: the LAN's
	// (ICMPSource4/6, SetICMPSources), Linux's choice without one, but
	// for an error to a link-local address, which is not sent then
	// (Linux picks from wg0's own addresses alone for it).
	TunnelSource4, TunnelSource6 netip.Addr
	// MSSClamp4 and MSSClamp6 clamp the MSS option of TCP SYNs crossing
	// the device either way to at most this many bytes (header.ClampMSS;
	// config's MSSClamp); 0: no clamp.
	MSSClamp4, MSSClamp6 uint16
	// ICMPRate limits the time exceeded errors the device sends, as
	// Linux's icmp_msgs_per_sec, icmp_msgs_burst and icmp_ratelimit do
	// (zero fields: Linux's defaults; see ICMPRate). "Fragmentation
	// needed" and "packet too big" are never limited.
	ICMPRate ICMPRate
}

// PortDevice is a tun.Device whose plaintext side is a dataplane port: Read
// returns the IP packets of the frames the port's queues receive (Ethernet
// header stripped), Write sends IP packets as Ethernet frames to their next
// hop on the LAN, both as the router it stands in for would (router.go).
//
// Concurrency: Read owns every RX half and must be called by one goroutine
// at a time (wireguard-go has one TUN reader). Write is safe for
// concurrent use: each TX half is guarded by a mutex taken once per batch
// of up to PortBatchSize packets for each queue the batch uses; a packet
// goes on the TX queue of its flow (FlowHash), so that a flow is never
// reordered, as on a kernel multi-queue TUN. Next hops are resolved before a TX queue is taken,
// so the lock order is the neighbour table's lock, then a TX queue's; an
// arp.FrameProber may call SendFrame from under the table's lock.
type PortDevice struct {
	cfg  PortConfig
	name string
	mac  header.MAC
	// lanMTU is the largest IP packet Write sends to the LAN whole: the
	// port's MTU, then SetLANMTU's; loaded once per Write call.
	lanMTU atomic.Int32
	// no6 says the tunnel carries no IPv6: its MTU (PortConfig.MTU, fixed
	// at New) is below IPv6's minimum, 1280 (RFC 8200 §5), where Linux
	// turns IPv6 off on its wg0 (PortDropIPv6Off).
	no6    bool
	events chan tun.Event

	rmu    sync.Mutex // held by the goroutine inside Read; Close takes it
	rxs    []dataplane.RX
	w      *dataplane.Waiter
	frames []dataplane.Frame // guarded by rmu
	reply  []byte            // guarded by rmu
	nextQ  int               // guarded by rmu
	spin   dataplane.Spinner // guarded by rmu: Read's idle spin
	frag   fragState         // guarded by rmu (mtu.go)
	warm   byte              // guarded by rmu: what dataplane.Warm returned, kept so its loads stay

	// icmpSrc holds the sources of the answers to oversized packets
	// and to packets without a route (PortConfig.ICMPSource4/6, then
	// SetICMPSources and SetICMPLinkLocal, which icmpSrcMu serializes);
	// loaded per answer.
	icmpSrc   atomic.Pointer[icmpSources]
	icmpSrcMu sync.Mutex
	// noRoute are the prefixes whose received packets Read drops (drop
	// true) and the allowed IPs inside them (false), SetNoRoute's; nil
	// without a drop prefix. Loaded once per Read loop turn.
	noRoute atomic.Pointer[bart.Table[bool]]
	// noRouteAll is the table of both sets, published as noRoute while
	// noRouteDrops, the number of drop prefixes, is above 0; noRouteMu
	// guards both and orders noRoute's writers (SetNoRoute,
	// UpdateNoRoute).
	noRouteAll   *bart.Table[bool]
	noRouteDrops int
	noRouteMu    sync.Mutex
	// noEndpoint are the allowed IPs and their peers' endpoint checks
	// (SetNoEndpoint); nil while every peer has an endpoint. Loaded once
	// per Read loop turn.
	noEndpoint atomic.Pointer[bart.Table[EndpointChecker]]

	// allowed holds every peer's allowed IPs (SetAllowedIPs), value the
	// prefix length: Write hands a packet to them back to Read (router.go).
	// Nil until set. Loaded once per Write call. allowedMu orders its
	// writers (SetAllowedIPs, UpdateAllowedIPs).
	allowed   atomic.Pointer[bart.Table[uint8]]
	allowedMu sync.Mutex
	// hosts are the host's own addresses (SetHostAddrs), whose
	// decrypted packets Write drops as local; nil while none. Loaded
	// once per Write call.
	hosts atomic.Pointer[hostSet]
	loop  loopQueue // Write → Read (loop.go)
	// icmpLimit rate-limits time exceeded (router.go) and host
	// unreachable (unreach.go) by PortConfig.ICMPRate, on a clock of ns
	// since epoch.
	icmpLimit *icmprate.Limiter
	epoch     time.Time

	txqs []*portTX

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	ctr portCounters
}

type portTX struct {
	mu     sync.Mutex
	tx     dataplane.TX
	frames []dataplane.Frame // scratch, guarded by mu
}

var _ tun.Device = (*PortDevice)(nil)

// NewPortDevice returns a device over cfg.Port. Its Events channel holds
// tun.EventUp at once, so wireguard-go brings the device up.
func NewPortDevice(cfg PortConfig) (*PortDevice, error) {
	switch {
	case cfg.Port == nil:
		return nil, errors.New("tundev: no port")
	case cfg.Routes == nil || cfg.Neighbours == nil:
		return nil, errors.New("tundev: no routes or neighbour table")
	case len(cfg.Port.MAC()) != header.MACLen:
		return nil, fmt.Errorf("tundev: port MAC %v is not 6 bytes", cfg.Port.MAC())
	}
	if cfg.Name == "" {
		cfg.Name = cfg.Port.Name()
	}
	if cfg.MTU < 0 {
		return nil, fmt.Errorf("tundev: MTU %d: the tunnel MTU in bytes, or 0 for the port's", cfg.MTU)
	}
	if cfg.MTU == 0 {
		cfg.MTU = cfg.Port.MTU()
	}
	if cfg.MTU < header.IPv4MinMTU || cfg.MTU > 65535 {
		return nil, fmt.Errorf("tundev: MTU %d outside [%d, 65535] (IPv4's minimum, an IP packet's maximum)", cfg.MTU, header.IPv4MinMTU)
	}
	if cfg.ResolveWait <= 0 {
		cfg.ResolveWait = DefaultResolveWait
	}
	w, err := dataplane.NewWaiter()
	if err != nil {
		return nil, fmt.Errorf("tundev: %w", err)
	}
	d := &PortDevice{
		cfg: cfg, name: cfg.Name, mac: header.MAC(cfg.Port.MAC()), no6: cfg.MTU < header.IPv6MinMTU,
		events: make(chan tun.Event, 1), w: w,
		frames:    make([]dataplane.Frame, PortBatchSize),
		reply:     make([]byte, max(arp.NDPFrameLen, header.EthernetVLANLen+header.ICMPv6ErrorMaxLen)),
		frag:      newFragState(largestMTU(cfg.Port)),
		loop:      newLoopQueue(cfg.MTU),
		icmpLimit: icmprate.New(cfg.ICMPRate), epoch: time.Now(),
		spin: dataplane.NewSpinner(dataplane.DefaultSpin, dataplane.MinSpin),
	}
	for i := range cfg.Port.NumQueues() {
		q := cfg.Port.Queue(i)
		d.rxs = append(d.rxs, q.RX())
		w.Add(q.RX())
		d.txqs = append(d.txqs, &portTX{tx: q.TX(), frames: make([]dataplane.Frame, PortBatchSize)})
	}
	d.lanMTU.Store(int32(cfg.Port.MTU()))
	d.storeICMPSources(cfg.ICMPSource4, cfg.ICMPSource6, cfg.ICMPLinkLocal6, nil)
	d.events <- tun.EventUp
	return d, nil
}

// largestMTU is the largest MTU p may take while running: its MaxMTU
// when it tells one (afxdp.Port: what its frames hold, which SetMTU
// raises the MTU up to without reopening it), else its MTU.
func largestMTU(p dataplane.Port) int {
	if m, ok := p.(interface{ MaxMTU() int }); ok {
		return max(m.MaxMTU(), p.MTU())
	}
	return p.MTU()
}

// File returns nil: there is no file descriptor behind the device.
func (d *PortDevice) File() *os.File { return nil }

// MTU returns PortConfig.MTU.
func (d *PortDevice) MTU() (int, error) { return d.cfg.MTU, nil }

// Name returns PortConfig.Name.
func (d *PortDevice) Name() (string, error) { return d.name, nil }

// Events returns the event channel: tun.EventUp once, closed by Close.
func (d *PortDevice) Events() <-chan tun.Event { return d.events }

// BatchSize returns PortBatchSize.
func (d *PortDevice) BatchSize() int { return PortBatchSize }

// Close makes Read and Write return os.ErrClosed, waits for a Read in
// progress to leave, and closes the event channel. The port stays open.
func (d *PortDevice) Close() error {
	d.closeOnce.Do(func() {
		d.closed.Store(true)
		d.w.Ring()
		d.rmu.Lock()
		d.closeErr = d.w.Close()
		d.rmu.Unlock()
		close(d.events)
	})
	return d.closeErr
}

// Read waits until the port's queues have received at least one IP packet,
// then copies up to len(bufs) packets (the IP packet of each frame: the
// Ethernet header and any 802.1Q tag stripped, Ethernet padding cut at the
// IP length) into bufs[i][offset:], sets sizes[i] and returns how many. The
// queues are taken in turn, so that a busy one does not starve the others.
// The frames go back to their queues before Read returns; bufs stay the
// caller's. In owned mode ARP/NDP frames are answered on the way. Each
// packet is forwarded as a router forwards it (router.go: checked, its TTL
// lowered, its SYN's MSS clamped; one with TTL 1 is answered with time
// exceeded instead), and the packets Write handed back (peer to peer, time
// exceeded into the tunnel: loop.go) come first. Read allocates nothing.
// After Close it returns os.ErrClosed. Given no room (bufs or sizes empty)
// it returns 0 and nil at once and receives nothing, as io.Reader's Read
// of an empty buffer (before, it blocked for good). While nothing
// comes, it polls again (yielding to other goroutines) for an adaptive
// spin (dataplane.Spinner, at most dataplane.DefaultSpin) before it blocks
// in poll(2): at high rates a reader never sleeps, so it pays no wake-up
// per batch.
func (d *PortDevice) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	d.rmu.Lock()
	defer d.rmu.Unlock()
	want := min(len(bufs), len(sizes))
	if want == 0 {
		if d.closed.Load() {
			return 0, os.ErrClosed
		}
		return 0, nil
	}
	spinning, spinStart := false, time.Time{}
	parks := d.w.Parks()
	for {
		if d.closed.Load() {
			return 0, os.ErrClosed
		}
		nr, ne := d.noRoute.Load(), d.noEndpoint.Load()
		// Fragments of packets received before go first; while they
		// fill the buffers nothing more is received.
		n, m := d.frag.next(d, bufs[:want], sizes[:want], offset), 0
		n += d.loop.pop(d, bufs[n:want], sizes[n:want], offset)
		for i := 0; i < len(d.rxs) && n < want && !d.frag.pending(); i++ {
			rx := d.rxs[d.nextQ]
			d.nextQ++
			if d.nextQ == len(d.rxs) {
				d.nextQ = 0
			}
			got := rx.Receive(d.frames[:min(want-n, len(d.frames))])
			d.warm ^= dataplane.Warm(d.frames[:got])
			m += got
			for j := range got {
				if d.take(d.frames[j].Data(), bufs[n], offset, &sizes[n], nr, ne) {
					n++
				}
			}
			rx.Free(d.frames[:got])
			clear(d.frames[:got])
			n += d.frag.next(d, bufs[n:want], sizes[n:want], offset)
		}
		if n > 0 {
			if spinning && !parks {
				d.spin.Hit(int64(time.Since(spinStart)))
			}
			d.ctr.rx.Add(uint64(n))
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
		case parks || int64(time.Since(spinStart)) >= d.spin.Budget():
			d.spin.Miss()
			spinning = false
			if _, err := d.w.Wait(dataplane.Forever); err != nil {
				if d.closed.Load() {
					return 0, os.ErrClosed
				}
				return 0, fmt.Errorf("tundev: wait: %w", err)
			}
			continue
		}
		runtime.Gosched()
	}
}

// take copies the IP packet of one received frame into buf[offset:] and
// reports whether it did. A packet to a prefix of nr (SetNoRoute's table,
// or nil) or to a peer without endpoint (ne, SetNoEndpoint's table, or
// nil) is dropped; one over the tunnel MTU goes to overMTU (queued for
// fragmentation, or answered) and take reports false.
func (d *PortDevice) take(frame, buf []byte, offset int, size *int, nr *bart.Table[bool], ne *bart.Table[EndpointChecker]) bool {
	if len(frame) < header.EthernetLen {
		d.ctr.drops[PortDropMalformed].Add(1)
		return false
	}
	l3 := header.EthernetLen
	et := binary.BigEndian.Uint16(frame[12:14])
	if et == header.EtherTypeVLAN {
		if len(frame) < header.EthernetVLANLen {
			d.ctr.drops[PortDropMalformed].Add(1)
			return false
		}
		l3 = header.EthernetVLANLen
		et = binary.BigEndian.Uint16(frame[16:18])
		if binary.BigEndian.Uint16(frame[14:16])&header.VLANIDMask != 0 || et == header.EtherTypeVLAN || et == header.EtherTypeQinQ {
			d.ctr.drops[PortDropVLAN].Add(1)
			return false
		}
	} else if et == header.EtherTypeQinQ {
		d.ctr.drops[PortDropVLAN].Add(1)
		return false
	}
	if d.cfg.Responder != nil && (et == header.EtherTypeARP || et == header.EtherTypeIPv6) && l3 == header.EthernetLen {
		if d.neighbour(frame) {
			return false
		}
	}
	pkt := frame[l3:]
	var n int
	switch et {
	case header.EtherTypeIPv4:
		if len(pkt) < header.IPv4MinLen || pkt[0]>>4 != 4 {
			d.ctr.drops[PortDropMalformed].Add(1)
			return false
		}
		n = int(binary.BigEndian.Uint16(pkt[2:4]))
		if n < int(pkt[0]&0xf)*4 || n < header.IPv4MinLen {
			d.ctr.drops[PortDropMalformed].Add(1)
			return false
		}
	case header.EtherTypeIPv6:
		if len(pkt) < header.IPv6Len || pkt[0]>>4 != 6 {
			d.ctr.drops[PortDropMalformed].Add(1)
			return false
		}
		n = header.IPv6Len + int(binary.BigEndian.Uint16(pkt[4:6]))
	default:
		d.ctr.drops[PortDropNotIP].Add(1)
		return false
	}
	if n > len(pkt) {
		d.ctr.drops[PortDropMalformed].Add(1)
		return false
	}
	// A router's checks first (options, addresses, TTL, a link-local
	// source: forwardIn), as Linux's ip_forward / ip6_forward make them
	// before wg_xmit finds no peer.
	if !d.forwardIn(frame[:l3], pkt[:n]) {
		return false
	}
	if why := noPeer(nr, ne, pkt[:n]); why != NumPortDropReasons {
		// As Linux's wg0: the route's MTU first (fragmentation
		// needed, counted over_mtu), then host unreachable about
		// what wg_xmit is handed (the frame is dropped: rewritten in
		// place): the packet with its hop taken, ip_forward's, and
		// of IPv4 without DF over the MTU its first fragment, the
		// one Linux answers (as the fast path's noPeer).
		if n > d.cfg.MTU && (et == header.EtherTypeIPv6 || header.IPv4(pkt).DontFragment()) {
			d.overMTU(frame[:l3], pkt[:n])
			return false
		}
		d.ctr.drops[why].Add(1)
		header.DecrementHop(pkt[:n])
		if n > d.cfg.MTU {
			var fr header.IPv4Fragmenter
			if fr.Reset(pkt[:n], d.cfg.MTU) != header.OK {
				return false
			}
			n = fr.PutFirst()
		}
		d.unreachable(frame[:l3], pkt[:n])
		return false
	}
	if n > d.cfg.MTU {
		d.overMTU(frame[:l3], pkt[:n])
		return false
	}
	if offset+n > len(buf) {
		d.ctr.drops[PortDropTooBig].Add(1)
		return false
	}
	p := buf[offset : offset+n]
	*size = copy(p, pkt[:n])
	header.DecrementHop(p)
	d.clampMSS(p)
	if d.frag.pending() {
		// Behind the fragments of a packet received before it.
		d.frag.queueWhole(d, p)
		return false
	}
	return true
}

// neighbour hands a frame to the Responder and sends its answer; it
// reports whether the frame was ARP/NDP (used or dropped).
func (d *PortDevice) neighbour(frame []byte) bool {
	n, rs := d.cfg.Responder.Handle(frame, d.reply)
	switch {
	case n > 0:
		if d.SendFrame(d.reply[:n]) == nil {
			d.ctr.replies.Add(1)
		}
		return true
	case rs == arp.ReasonNone:
		return true
	case rs == arp.ReasonNotNeighbour:
		return false
	}
	d.ctr.drops[PortDropNeighbour].Add(1)
	return true
}

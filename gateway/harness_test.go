package gateway

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/conn/bindtest"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun/tuntest"

	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/noise"
	"github.com/wgpio/wgpio/protocol"
)

// The engine is the dataplane the control plane drives in production.
var _ Dataplane = (*fastpath.Engine)(nil)

// sentPacket is one ControlPacket the device posted, with the fake clock's
// time.
type sentPacket struct {
	at      int64
	typ     byte
	size    int
	dst     netip.AddrPort
	src     netip.Addr // ControlPacket.Src
	dstMAC  [6]byte    // ControlPacket.DstMAC
	payload []byte
}

// fakeDP is a test-only Dataplane: it records every control packet, stamps
// peers the way workers do, and carries transport data to and from a stock
// wireguard-go device over bindtest channel binds with the simplest
// possible reference data path (Indexes().Lookup + Open on receive,
// Current.Seal on send). Its clock is a number the test moves.
type fakeDP struct {
	t     testing.TB
	clock atomic.Int64
	idx   fastpath.IndexTable
	hs    chan fastpath.HandshakeMessage
	load  atomic.Bool
	drop  atomic.Bool // lose everything on the wire, both ways
	// viaChannel: deliver handshake messages through Handshakes() (for
	// Device.Start's loop) instead of calling HandleMessage.
	viaChannel bool
	kicks      atomic.Int64
	reaps      atomic.Int64
	// SendWait: mailboxFull makes every SendWait run out, and every Send
	// refuse; fullUntil makes the next that many SendWaits find the
	// mailbox full and wait (waited counts them) before delivering.
	mailboxFull atomic.Bool
	fullUntil   atomic.Int64
	waited      atomic.Int64

	mu       sync.Mutex
	peers    []*fastpath.Peer
	allowed  [][]netip.Prefix                // of peers[i], sorted
	routes   map[netip.Prefix]*fastpath.Peer // the prefix table
	nextID   int
	setPeers int // calls of UpdatePeers
	sent     []sentPacket
	retired  []*fastpath.Keypair     // Retire's arguments
	stamped  map[*fastpath.Peer]bool // peers stamped since the last StampedPeers

	bind   conn.Bind // our side of the channel binds
	rx     chan []byte
	wgSrc  atomic.Pointer[netip.AddrPort] // outer source we attribute to wireguard-go's packets
	ourDst netip.AddrPort
	inner  chan []byte // decrypted inner packets from wireguard-go
}

const fakeEpoch = int64(1000 * time.Second) // the fake clock starts here (0 means "never" in stamps)

func newFakeDP(t testing.TB) *fakeDP {
	f := &fakeDP{
		t:      t,
		hs:     make(chan fastpath.HandshakeMessage, fastpath.HandshakeQueueLen),
		rx:     make(chan []byte, 1024),
		inner:  make(chan []byte, 1024),
		ourDst: netip.MustParseAddrPort("198.18.0.1:51820"),
	}
	f.clock.Store(fakeEpoch)
	src := netip.MustParseAddrPort("198.18.0.2:51820")
	f.wgSrc.Store(&src)
	return f
}

// UpdatePeers keeps the peer set in order of arrival and each one's
// allowed IPs (f.allowed[i] for f.peers[i], sorted), as the engine would
// route them.
func (f *fakeDP) UpdatePeers(c fastpath.PeerChange) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(c.Remove) > 0 {
		gone := make(map[*fastpath.Peer]bool, len(c.Remove))
		for _, p := range c.Remove {
			gone[p] = true
		}
		n := len(f.peers)
		f.peers = slices.DeleteFunc(f.peers, func(p *fastpath.Peer) bool { return gone[p] })
		if n-len(f.peers) != len(gone) {
			f.t.Errorf("UpdatePeers: %d peers removed, %d of them in the set", len(gone), n-len(f.peers))
		}
	}
	for _, p := range c.Add {
		p.ID = f.nextID
		f.nextID++
		f.peers = append(f.peers, p)
	}
	if f.routes == nil {
		f.routes = make(map[netip.Prefix]*fastpath.Peer)
	}
	for _, r := range c.Routes {
		if r.Peer == nil {
			delete(f.routes, r.Prefix)
		} else {
			f.routes[r.Prefix] = r.Peer
		}
	}
	f.allowed = make([][]netip.Prefix, len(f.peers))
	pos := make(map[*fastpath.Peer]int, len(f.peers))
	for i, p := range f.peers {
		pos[p] = i
	}
	for pfx, p := range f.routes {
		i, ok := pos[p]
		if !ok {
			f.t.Errorf("UpdatePeers: %v routed to a peer not in the set", pfx)
			continue
		}
		f.allowed[i] = append(f.allowed[i], pfx)
	}
	for _, l := range f.allowed {
		slices.SortFunc(l, func(a, b netip.Prefix) int { return strings.Compare(a.String(), b.String()) })
	}
	f.setPeers++
	return nil
}

func (f *fakeDP) Handshakes() <-chan fastpath.HandshakeMessage { return f.hs }
func (f *fakeDP) UnderLoad() bool                              { return f.load.Load() }
func (f *fakeDP) Kick()                                        { f.kicks.Add(1) }
func (f *fakeDP) Now() int64                                   { return f.clock.Load() }
func (f *fakeDP) Indexes() *fastpath.IndexTable                { return &f.idx }

// Retire erases at once: the fake has no workers that could hold kp. It
// records kp (retired) and Reap counts its calls (reaps).
func (f *fakeDP) Retire(kp *fastpath.Keypair) {
	f.mu.Lock()
	f.retired = append(f.retired, kp)
	f.mu.Unlock()
	kp.Zero()
}

func (f *fakeDP) Reap() int {
	f.reaps.Add(1)
	return 0
}

func (f *fakeDP) wasRetired(kp *fastpath.Keypair) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.retired, kp)
}

func (f *fakeDP) Send(queue int, pkt fastpath.ControlPacket) bool {
	if f.mailboxFull.Load() {
		return false
	}
	now := f.clock.Load()
	b := append([]byte(nil), pkt.Payload...)
	f.mu.Lock()
	f.sent = append(f.sent, sentPacket{at: now, typ: b[0], size: len(b), dst: pkt.Dst, src: pkt.Src, dstMAC: pkt.DstMAC, payload: b})
	f.mu.Unlock()
	if pkt.Peer != nil {
		f.stamp(pkt.Peer)
		storeMax(&pkt.Peer.Stamps.LastSent, now)
		pkt.Peer.TxBytes.Add(uint64(len(b)))
	}
	f.wire(b, pkt.Dst)
	return true
}

// SendWait is Send, or, while full (fullUntil > 0: that many more tries
// refused), counts a try that found the mailbox full and then delivers, as
// the engine does once its worker made room; mailboxFull refuses all.
func (f *fakeDP) SendWait(queue int, pkt fastpath.ControlPacket, timeout time.Duration) bool {
	if f.fullUntil.Load() > 0 && !f.mailboxFull.Load() {
		f.fullUntil.Add(-1)
		f.waited.Add(1)
	}
	return f.Send(queue, pkt)
}

// stamp records that p's stamps change, for StampedPeers.
func (f *fakeDP) stamp(p *fastpath.Peer) {
	f.mu.Lock()
	if f.stamped == nil {
		f.stamped = make(map[*fastpath.Peer]bool)
	}
	f.stamped[p] = true
	f.mu.Unlock()
}

// StampedPeers reports the peers stamped since the last call and, as the
// engine's workers report a peer when they raise its flags, every peer
// whose HandshakeNeeded, Promoted or NeedNeighbour is set (tests raise
// them directly). With it the device's timers run from the timer heap, as
// over the engine.
func (f *fakeDP) StampedPeers(dst []*fastpath.Peer) []*fastpath.Peer {
	f.mu.Lock()
	defer f.mu.Unlock()
	for p := range f.stamped {
		dst = append(dst, p)
	}
	clear(f.stamped)
	for _, p := range f.peers {
		if p.HandshakeNeeded.Load() || p.Promoted.Load() || p.NeedNeighbour.Load() {
			dst = append(dst, p)
		}
	}
	return dst
}

func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// wire sends b toward wireguard-go (unless dropping): an IPv4 destination
// over the binds' IPv4 channel, IPv6 over the IPv6 one.
func (f *fakeDP) wire(b []byte, dst netip.AddrPort) {
	if f.bind == nil || f.drop.Load() {
		return
	}
	ep := bindtest.ChannelEndpoint(2) // the other bind's IPv4 source
	if dst.Addr().Is6() && !dst.Addr().Is4In6() {
		ep = 4
	}
	if err := f.bind.Send([][]byte{b}, ep); err != nil {
		f.t.Logf("bind send: %v", err)
	}
}

// sentSince returns the packets sent at or after index i.
func (f *fakeDP) sentSince(i int) []sentPacket {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sentPacket(nil), f.sent[i:]...)
}

func (f *fakeDP) nsent() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sent)
}

// connect opens our side of the channel binds and reads what wireguard-go
// sends into f.rx.
func (f *fakeDP) connect(b conn.Bind) {
	fns, _, err := b.Open(0)
	if err != nil {
		f.t.Fatalf("open bind: %v", err)
	}
	f.bind = b
	for _, fn := range fns {
		go func() {
			bufs := [][]byte{make([]byte, 65536)}
			sizes := []int{0}
			eps := []conn.Endpoint{nil}
			for {
				n, err := fn(bufs, sizes, eps)
				if err != nil {
					return
				}
				if n == 1 && !f.drop.Load() {
					f.rx <- append([]byte(nil), bufs[0][:sizes[0]]...)
				}
			}
		}()
	}
	f.t.Cleanup(func() { b.Close() })
}

// deliver processes one packet from wireguard-go: handshake messages go to
// dev (synchronously), transport data through the reference data path.
func (f *fakeDP) deliver(dev *Device, b []byte) {
	if len(b) < 4 {
		return
	}
	now := f.clock.Load()
	switch b[0] {
	case noise.TypeInitiation, noise.TypeResponse, noise.TypeCookieReply:
		m := fastpath.HandshakeMessage{
			Src: *f.wgSrc.Load(), Dst: f.ourDst, SrcMAC: [6]byte{2, 0, 0, 0, 0, 2},
			Data: b, Received: now,
		}
		if f.viaChannel {
			f.hs <- m
		} else {
			dev.HandleMessage(m)
		}
	case noise.TypeTransport:
		recv, counter, ok := noise.ParseTransportHeader(b)
		if !ok {
			return
		}
		kp := f.idx.Lookup(recv)
		if kp == nil || kp.Dead() {
			return
		}
		p, ok := kp.Open(b[noise.TransportHeaderSize:], counter)
		if !ok {
			return
		}
		peer := kp.Peer
		// Promotion of the responder's Next, as the workers do it.
		peer.Promote(kp)
		f.stamp(peer)
		storeMax(&peer.Stamps.LastReceived, now)
		peer.RxBytes.Add(uint64(len(b)))
		if len(p) > 0 {
			storeMax(&peer.Stamps.LastDataReceived, now)
			f.inner <- append([]byte(nil), p...)
		}
	}
}

// sendData seals an inner packet to peer with its current keypair, or
// flags a handshake as the workers do when there is none. It reports
// whether the packet went out.
func (f *fakeDP) sendData(peer *fastpath.Peer, pkt []byte) bool {
	now := f.clock.Load()
	kp := peer.Current.Load()
	ep := peer.Endpoint.Load()
	if kp == nil || kp.Dead() || now-kp.Created >= int64(protocol.RejectAfterTime) || ep == nil {
		peer.HandshakeNeeded.Store(true)
		return false
	}
	c, n := kp.ReserveNonces(1)
	if n == 0 {
		peer.HandshakeNeeded.Store(true)
		return false
	}
	pad := noise.PaddingLen(len(pkt), 1420)
	plain := make([]byte, len(pkt)+pad)
	copy(plain, pkt)
	out := make([]byte, noise.TransportHeaderSize, noise.TransportHeaderSize+len(plain)+noise.TagSize)
	noise.PutTransportHeader(out, kp.RemoteIndex, c)
	out = kp.Seal(out, plain, c)
	f.stamp(peer)
	storeMax(&peer.Stamps.LastSent, now)
	storeMax(&peer.Stamps.LastDataSent, now)
	peer.TxBytes.Add(uint64(len(out)))
	f.wire(out, ep.Dst)
	return true
}

// rig is our Device on a fakeDP wired to a stock wireguard-go device.
type rig struct {
	t      testing.TB
	f      *fakeDP
	dev    *Device
	wg     *device.Device
	wgTUN  *tuntest.ChannelTUN
	wgOut  chan []byte // inner packets wireguard-go delivered
	ourKey noise.PrivateKey
	wgKey  noise.PrivateKey
	wgPub  noise.PublicKey
	psk    noise.PresharedKey
	wgHS   *noise.Handshake // see wgInitiation
}

var (
	ourInner = netip.MustParseAddr("198.19.0.1")
	wgInner  = netip.MustParseAddr("198.19.0.2")
)

type rigOptions struct {
	psk       bool
	ourEP     string // endpoint wireguard-go is given for us ("" none)
	wgEP      string // endpoint we are given for wireguard-go ("" none)
	keepalive time.Duration
	fixJitter time.Duration
	unclamped bool // the device is given ourKey unclamped (low 3 bits and bit 255 set)
	// resolve is the device's Options.Resolve (nil: none).
	resolve func(dst netip.Addr) (mac [6]byte, ok bool)
	// known is the device's Options.Known (nil: none, Resolve serves).
	known func(dst netip.Addr) (mac [6]byte, ok bool)
	// source is the device's Options.Source (nil: none).
	source RouteSources
	// routed is the device's Options.Routed (nil: none).
	routed func(dst netip.Addr) bool
	// resolveChanges is the device's Options.ResolveChanges (nil: none).
	resolveChanges func() uint64
}

func newRig(t testing.TB, o rigOptions) *rig {
	t.Helper()
	r := &rig{t: t, f: newFakeDP(t), wgOut: make(chan []byte, 1024)}
	var err error
	if r.ourKey, err = noise.NewPrivateKey(); err != nil {
		t.Fatal(err)
	}
	if r.wgKey, err = noise.NewPrivateKey(); err != nil {
		t.Fatal(err)
	}
	r.wgPub = r.wgKey.PublicKey()
	if o.psk {
		if r.psk, err = noise.NewPresharedKey(); err != nil {
			t.Fatal(err)
		}
	}
	jit := func() time.Duration { return o.fixJitter }
	given := r.ourKey
	if o.unclamped {
		given[0] |= 7
		given[31] |= 128
	}
	r.dev, err = New(Options{PrivateKey: given, ListenPort: 51820, Dataplane: r.f, Jitter: jit, Resolve: o.resolve, Known: o.known, Routed: o.routed, Source: o.source,
		ResolveChanges: o.resolveChanges, WANAddr4: netip.MustParseAddr("198.18.0.1"), WANAddr6: netip.MustParseAddr("2001:2::1")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.dev.Close() })
	pc := PeerConfig{PublicKey: r.wgPub, PresharedKey: r.psk, PersistentKeepalive: o.keepalive,
		AllowedIPs: []netip.Prefix{netip.PrefixFrom(wgInner, 32)}}
	if o.wgEP != "" {
		pc.Endpoint = netip.MustParseAddrPort(o.wgEP)
	}
	if err := r.dev.AddPeer(pc); err != nil {
		t.Fatal(err)
	}
	// The rig drives a running device by hand (Tick on its clock)
	// without Start: a keepalive turned on is sent at once, as on a
	// device that is up.
	r.dev.started.Store(true)

	binds := bindtest.NewChannelBinds()
	r.wgTUN = tuntest.NewChannelTUN()
	r.wg = device.NewDevice(r.wgTUN.TUN(), binds[0], device.NewLogger(device.LogLevelError, "wg-go: "))
	t.Cleanup(r.wg.Close)
	ourPub := r.ourKey.PublicKey()
	cfg := fmt.Sprintf("private_key=%s\nlisten_port=0\npublic_key=%s\npreshared_key=%s\nallowed_ip=%s/32\n",
		r.wgKey.Hex(), ourPub.Hex(), r.psk.Hex(), ourInner)
	if o.ourEP != "" {
		cfg += "endpoint=" + o.ourEP + "\n"
	}
	if err := r.wg.IpcSet(cfg); err != nil {
		t.Fatalf("wireguard-go IpcSet: %v", err)
	}
	if err := r.wg.Up(); err != nil {
		t.Fatalf("wireguard-go Up: %v", err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		for {
			select {
			case p := <-r.wgTUN.Inbound:
				r.wgOut <- p
			case <-done:
				return
			}
		}
	}()
	r.f.connect(binds[1])
	return r
}

func (r *rig) now() int64 { return r.f.clock.Load() }

// advance moves the fake clock by d and runs Tick.
func (r *rig) advance(d time.Duration) {
	r.f.clock.Add(int64(d))
	r.dev.Tick(r.now())
}

// waitLimit bounds the real time a test waits for wireguard-go (its
// goroutines, timers and crypto) to do something: generous, because it
// only runs out when the test fails, and CI runs -race on 2 busy cores.
const waitLimit = 30 * time.Second

// pump processes what wireguard-go sent until cond holds (checked after
// each packet and each idle 5 ms) or timeout of real time passes.
func (r *rig) pump(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond != nil && cond() {
			return true
		}
		select {
		case b := <-r.f.rx:
			r.f.deliver(r.dev, b)
		case <-time.After(5 * time.Millisecond):
			if time.Now().After(deadline) {
				return cond == nil
			}
		}
	}
}

// wgSend makes wireguard-go send one inner packet to us.
func (r *rig) wgSend(seq int) {
	p := tuntest.Ping(ourInner, wgInner)
	binary.BigEndian.PutUint16(p[len(p)-2:], uint16(seq)) // last payload bytes: sequence
	r.wgTUN.Outbound <- p                                 // tuntest: Outbound is what the device reads
}

// ourPacket is an inner packet from us to wireguard-go.
func ourPacket(seq int) []byte {
	p := tuntest.Ping(wgInner, ourInner)
	binary.BigEndian.PutUint16(p[len(p)-2:], uint16(seq))
	return p
}

// waitInner waits for an inner packet that wireguard-go sent us.
func (r *rig) waitInner(timeout time.Duration) ([]byte, bool) {
	var got []byte
	ok := r.pump(timeout, func() bool {
		select {
		case got = <-r.f.inner:
			return true
		default:
			return false
		}
	})
	return got, ok
}

// waitWG waits for an inner packet wireguard-go delivered.
func (r *rig) waitWG(timeout time.Duration) ([]byte, bool) {
	var got []byte
	ok := r.pump(timeout, func() bool {
		select {
		case got = <-r.wgOut:
			return true
		default:
			return false
		}
	})
	return got, ok
}

func (r *rig) fp() *fastpath.Peer { return r.dev.FastPeer(r.wgPub) }

// establishAsInitiator makes our device initiate (data waiting) and waits
// until the session is in place and confirmed to wireguard-go.
func (r *rig) establishAsInitiator() *fastpath.Keypair {
	r.t.Helper()
	fp := r.fp()
	fp.HandshakeNeeded.Store(true)
	r.dev.Tick(r.now())
	if !r.pump(waitLimit, func() bool { return fp.Current.Load() != nil }) {
		r.t.Fatalf("no session with wireguard-go as responder; sent %v", types(r.f.sentSince(0)))
	}
	return fp.Current.Load()
}

func types(s []sentPacket) []string {
	var out []string
	for _, p := range s {
		out = append(out, fmt.Sprintf("t=%.3fs type %d (%d B) to %v", float64(p.at-fakeEpoch)/1e9, p.typ, p.size, p.dst))
	}
	return out
}

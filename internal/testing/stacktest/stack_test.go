// Package stacktest runs the whole wgpio stack — control plane (package
// gateway) and fast path (package fastpath) on both sides — over memport
// with an injected clock, so that protocol timers (rekey at 120 s, reject at
// 180 s) run in milliseconds while real packets flow.
package stacktest

import (
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/noise"
)

type clock struct{ ns atomic.Int64 }

func (c *clock) Now() int64               { return c.ns.Load() }
func (c *clock) Advance(d time.Duration)  { c.ns.Add(int64(d)) }
func (c *clock) Wall() time.Time          { return time.Unix(0, c.ns.Load()) }
func newClock() *clock                    { c := &clock{}; c.ns.Store(int64(time.Hour)); return c }
func hw(b byte) net.HardwareAddr          { return net.HardwareAddr{2, 0, 0, 0, 1, b} }
func mac6(m net.HardwareAddr) (r [6]byte) { copy(r[:], m); return r }

// resolver answers every address with one MAC.
type resolver [6]byte

func (r resolver) Resolve(netip.Addr) ([6]byte, bool) { return r, true }

type side struct {
	host, lan, wan *memport.Port
	eng            *fastpath.Engine
	dev            *gateway.Device
	priv           noise.PrivateKey
	wanAddr        netip.Addr
	hostAddr       netip.Addr
}

type stack struct {
	a, b *side
	clk  *clock
}

// newStack builds hostA ⇄ gwA ⇄ gwB ⇄ hostB with peers configured both
// ways (A knows B's endpoint; B learns A's from the handshake).
func newStack(t testing.TB, queues int, srcPorts uint16) *stack {
	t.Helper()
	s := &stack{clk: newClock()}
	pair := func(name string, ma, mb byte, q int) (*memport.Port, *memport.Port) {
		x, y, err := memport.NewPair(memport.Config{Name: name, Queues: q, MACA: hw(ma), MACB: hw(mb)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { x.Close(); y.Close() })
		return x, y
	}
	s.a = &side{wanAddr: netip.MustParseAddr("198.18.9.1"), hostAddr: netip.MustParseAddr("198.19.9.10")}
	s.b = &side{wanAddr: netip.MustParseAddr("198.18.9.2"), hostAddr: netip.MustParseAddr("198.19.10.10")}
	s.a.host, s.a.lan = pair("ha", 1, 2, queues)
	s.a.wan, s.b.wan = pair("w", 3, 4, queues)
	s.b.host, s.b.lan = pair("hb", 5, 6, queues)
	for _, sd := range []*side{s.a, s.b} {
		var err error
		if sd.priv, err = noise.NewPrivateKey(); err != nil {
			t.Fatal(err)
		}
		sd.eng, err = fastpath.New(fastpath.Config{
			LAN: sd.lan, WAN: sd.wan, ListenPort: 51820, WANAddr4: sd.wanAddr,
			WANResolver: resolver{}, LANResolver: resolver(mac6(sd.host.MAC())),
			Now: s.clk.Now, SourcePorts: srcPorts,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sd.eng.Close() })
	}
	for _, x := range []struct{ me, other *side }{{s.a, s.b}, {s.b, s.a}} {
		var err error
		x.me.dev, err = gateway.New(gateway.Options{
			PrivateKey: x.me.priv, ListenPort: 51820, Dataplane: x.me.eng,
			Now: s.clk.Now, WallClock: s.clk.Wall, WANMAC: mac6(x.me.wan.MAC()), WANAddr4: x.me.wanAddr,
			Resolve:      func(netip.Addr) ([6]byte, bool) { return mac6(x.other.wan.MAC()), true },
			TickInterval: 2 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { x.me.dev.Close() })
	}
	mustAdd := func(d *gateway.Device, pc gateway.PeerConfig) {
		if err := d.AddPeer(pc); err != nil {
			t.Fatal(err)
		}
	}
	mustAdd(s.a.dev, gateway.PeerConfig{PublicKey: s.b.priv.PublicKey(), Endpoint: netip.AddrPortFrom(s.b.wanAddr, 51820),
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.10.0/24")}})
	mustAdd(s.b.dev, gateway.PeerConfig{PublicKey: s.a.priv.PublicKey(),
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.9.0/24")}})
	for _, sd := range []*side{s.a, s.b} {
		sd.eng.Start()
		if err := sd.dev.Start(); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// send has src's host send one UDP datagram with seq to dst's host.
func (s *stack) send(t testing.TB, src, dst *side, seq uint32, sport uint16) bool {
	var fr [1]dataplane.Frame
	tx := src.host.Queue(0).TX()
	if tx.Alloc(fr[:]) != 1 {
		return false
	}
	f := &fr[0]
	const payload = 64
	n := header.EthernetLen + header.IPv4MinLen + header.UDPLen + payload
	f.SetLen(n)
	b := f.Data()
	header.PutEthernet(b, header.MAC(mac6(src.lan.MAC())), header.MAC(mac6(src.host.MAC())), header.EtherTypeIPv4)
	ip := header.IPv4Fields{Protocol: header.ProtoUDP, Src: src.hostAddr.As4(), Dst: dst.hostAddr.As4()}
	header.PutIPv4(b[14:], &ip, header.UDPLen+payload)
	header.PutUDP(b[34:], sport, 9, payload)
	clear(b[42:])
	binary.BigEndian.PutUint32(b[42:], seq)
	if tx.Transmit(fr[:]) != 1 {
		tx.Free(fr[:])
		return false
	}
	return true
}

// receiver drains a host port and records sequence numbers.
type receiver struct {
	mu   sync.Mutex
	seen map[uint32]int
	stop chan struct{}
	done chan struct{}
}

func receive(p *memport.Port) *receiver {
	r := &receiver{seen: make(map[uint32]int), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		buf := make([]dataplane.Frame, 64)
		for {
			select {
			case <-r.stop:
				return
			default:
			}
			got := 0
			for q := 0; q < p.NumQueues(); q++ {
				rx := p.Queue(q).RX()
				n := rx.Receive(buf)
				r.mu.Lock()
				for i := 0; i < n; i++ {
					d := buf[i].Data()
					if len(d) >= 46 {
						r.seen[binary.BigEndian.Uint32(d[42:])]++
					}
				}
				r.mu.Unlock()
				rx.Free(buf[:n])
				got += n
			}
			if got == 0 {
				time.Sleep(50 * time.Microsecond)
			}
		}
	}()
	return r
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

func (r *receiver) close() {
	close(r.stop)
	<-r.done
}

func waitFor(t testing.TB, what string, d time.Duration, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRekeyMidTransferLosesNothing sends a stream from A to B, jumps the
// clock past RekeyAfterTime in the middle, and checks that a new session
// was made and that every datagram arrived exactly once.
func TestRekeyMidTransferLosesNothing(t *testing.T) {
	s := newStack(t, 1, 1)
	r := receive(s.b.host)
	defer r.close()
	const total = 6000
	sent := 0
	next := func(n int) {
		for i := 0; i < n; i++ {
			// A window of 256 in flight: memport rings are finite, and
			// on a loaded machine B's worker may fall behind (a full
			// ring is a counted drop, not what this test is about).
			for sent-r.count() >= 256 {
				time.Sleep(50 * time.Microsecond)
			}
			for !s.send(t, s.a, s.b, uint32(sent), 1000) {
				time.Sleep(100 * time.Microsecond)
			}
			sent++
		}
	}
	// The first datagram waits for the handshake (held); stream after it.
	next(1)
	waitFor(t, "the first datagram (handshake)", 10*time.Second, func() bool { return r.count() == 1 })
	next(total/3 - 1)
	deadline := time.Now().Add(10 * time.Second)
	for r.count() != total/3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if r.count() != total/3 {
		t.Fatalf("first third: %d of %d delivered; drops A %v B %v; A stats %+v", r.count(), total/3,
			fastpath.TotalDrops(s.a.eng.Stats()), fastpath.TotalDrops(s.b.eng.Stats()), s.a.eng.Stats()[0])
	}
	sessions := s.a.dev.Stats().KeypairsInstalledTotal
	if sessions < 1 {
		t.Fatalf("A sessions = %d after the first third", sessions)
	}
	// Past Rekey-After-Time: the next data A sends makes it initiate.
	s.clk.Advance(121 * time.Second)
	next(total / 3)
	waitFor(t, "a new session at A", 10*time.Second, func() bool { return s.a.dev.Stats().KeypairsInstalledTotal > sessions })
	next(total - 2*(total/3))
	waitFor(t, "every datagram", 10*time.Second, func() bool { return r.count() == total })
	r.mu.Lock()
	for seq, n := range r.seen {
		if n != 1 {
			t.Errorf("datagram %d arrived %d times", seq, n)
		}
	}
	r.mu.Unlock()
	for _, sd := range []*side{s.a, s.b} {
		d := fastpath.TotalDrops(sd.eng.Stats())
		for reason, n := range d {
			if n > 0 {
				t.Errorf("drops[%v] = %d, want 0", fastpath.DropReason(reason), n)
			}
		}
	}
}

// TestRejectAfterTime: with no traffic for 180 s, the sessions are refused;
// new data makes a new handshake and gets through.
func TestRejectAfterTime(t *testing.T) {
	s := newStack(t, 1, 1)
	r := receive(s.b.host)
	defer r.close()
	s.send(t, s.a, s.b, 1, 1000)
	waitFor(t, "first datagram", 10*time.Second, func() bool { return r.count() == 1 })
	before := s.a.dev.Stats().KeypairsInstalledTotal
	s.clk.Advance(181 * time.Second)
	time.Sleep(20 * time.Millisecond) // a few ticks at the new time
	s.send(t, s.a, s.b, 2, 1000)
	// Both sides may initiate at once here (B's keepalive also finds no
	// session); the crossing initiations resolve through the retry after
	// RekeyTimeout, as in wireguard-go and the kernel: let protocol time
	// run 20× faster than wall time while waiting.
	deadline := time.Now().Add(10 * time.Second)
	for r.count() != 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
		s.clk.Advance(20 * time.Millisecond)
	}
	if r.count() != 2 {
		t.Fatalf("datagram after reject not delivered; A %+v; B %+v; drops A %v B %v", s.a.dev.Stats(), s.b.dev.Stats(),
			fastpath.TotalDrops(s.a.eng.Stats()), fastpath.TotalDrops(s.b.eng.Stats()))
	}
	if after := s.a.dev.Stats().KeypairsInstalledTotal; after <= before {
		t.Errorf("sessions %d → %d: no new handshake after Reject-After-Time", before, after)
	}
}

// TestMoreQueuesThanCores runs 8 queues (8 worker threads on this 2-core
// machine) with flows spread by RSS, and checks that everything arrives:
// idle workers block instead of spinning, so all make progress.
func TestMoreQueuesThanCores(t *testing.T) {
	s := newStack(t, 8, 16)
	r := receive(s.b.host)
	defer r.close()
	const total = 4000
	s.send(t, s.a, s.b, 0, 1000)
	waitFor(t, "the first datagram (handshake)", 10*time.Second, func() bool { return r.count() == 1 })
	for i := 1; i < total; i++ {
		for i-r.count() >= 256 {
			time.Sleep(50 * time.Microsecond)
		}
		for !s.send(t, s.a, s.b, uint32(i), uint16(1000+i%256)) {
			time.Sleep(100 * time.Microsecond)
		}
	}
	waitFor(t, "every datagram over 8 queues", 20*time.Second, func() bool { return r.count() == total })
	used := 0
	for _, q := range s.b.eng.Stats() {
		if q.Decrypted > 0 {
			used++
		}
	}
	if used < 2 {
		t.Errorf("B decrypted on %d queues, want the RSS spread over several", used)
	}
}

// TestCoalescedTimersKeepalive: the workers publish timer stamps at most
// every 50 ms, and the control plane's passive keepalive (whitepaper §6.5:
// KeepaliveTimeout = 10 s after data was received with nothing sent back)
// still fires within 50 ms (plus one tick) of the protocol's deadline.
func TestCoalescedTimersKeepalive(t *testing.T) {
	s := newStack(t, 1, 1)
	r := receive(s.b.host)
	defer r.close()
	s.send(t, s.a, s.b, 1, 1000)
	waitFor(t, "first datagram", 10*time.Second, func() bool { return r.count() == 1 })
	// Let B's worker publish its receive stamp (it publishes once the
	// clock has moved 50 ms past its last publish).
	s.clk.Advance(60 * time.Millisecond)
	// (The stamp itself: the peer's rx_bytes count the handshake too.)
	fp := s.b.dev.FastPeer(s.a.priv.PublicKey())
	waitFor(t, "B's stamps published", 5*time.Second, func() bool {
		return fp.Stamps.LastDataReceived.Load() > 0
	})
	recvAt := fp.Stamps.LastDataReceived.Load()
	before := s.b.dev.Stats().KeepalivesSent
	// Just before the deadline: nothing.
	s.clk.ns.Store(recvAt + int64(10*time.Second) - int64(100*time.Millisecond))
	time.Sleep(30 * time.Millisecond)
	if got := s.b.dev.Stats().KeepalivesSent; got != before {
		t.Fatalf("keepalive sent %v before the 10 s deadline", time.Duration(s.clk.Now()-recvAt))
	}
	// 50 ms after it (the publish interval): sent.
	s.clk.ns.Store(recvAt + int64(10*time.Second) + int64(50*time.Millisecond))
	waitFor(t, "the passive keepalive", 5*time.Second, func() bool { return s.b.dev.Stats().KeepalivesSent > before })
	if d := fastpath.TotalDrops(s.a.eng.Stats()); d != (fastpath.DropCounts{}) {
		t.Errorf("A drops %v", d)
	}
	waitFor(t, "A received the keepalive", 5*time.Second, func() bool {
		var n uint64
		for _, q := range s.a.eng.Stats() {
			n += q.KeepalivesReceived
		}
		return n > 0
	})
}

// TestNoKeepaliveAfterHandshakeWithHeldData: the initiator of a handshake
// started by held data confirms the session with that data, not with a
// keepalive as well (whitepaper §5.4.6, §6.5; wireguard-go's SendKeepalive
// after a consumed response queues a keepalive only when nothing is
// staged). The clock stands still, so no timer sends one either.
func TestNoKeepaliveAfterHandshakeWithHeldData(t *testing.T) {
	s := newStack(t, 1, 1)
	r := receive(s.b.host)
	defer r.close()
	s.send(t, s.a, s.b, 1, 1000)
	waitFor(t, "the held datagram", 10*time.Second, func() bool { return r.count() == 1 })
	fp := s.a.dev.FastPeer(s.b.priv.PublicKey())
	waitFor(t, "A's worker sent what it held", 5*time.Second, func() bool { return !fp.Holding() })
	time.Sleep(20 * time.Millisecond) // a keepalive posted with the data would be out by now
	if n := s.a.dev.Stats().KeepalivesSent; n != 0 {
		t.Errorf("A sent %d keepalives after its handshake with data held, want 0", n)
	}
	var got uint64
	for _, q := range s.b.eng.Stats() {
		got += q.KeepalivesReceived
	}
	if got != 0 {
		t.Errorf("B received %d keepalives, want 0", got)
	}
}

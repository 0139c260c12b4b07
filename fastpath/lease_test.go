package fastpath

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/protocol"
)

// TestOutboundLease: a worker sending a frame per burst for a peer takes
// its counters from a lease of leaseMin (one reservation for several
// bursts), in order without gaps; two workers sending for the same keypair
// never send a counter twice; a lease the keypair's counter ran more than
// leaseLag past (other queues sent) is dropped, and so is one of a
// keypair that is no longer the peer's, even when the new keypair's
// counter is just past the lease's: the next counter comes from a new
// reservation of the keypair in use.
func TestOutboundLease(t *testing.T) {
	r := newRig(t, rigConfig{queues: 2, srcPorts: 16})
	tmpls := queueTemplates(t, r, 2, 16, hostAddrB, 22) // one flow per queue
	// send runs one burst of one frame through worker q and returns the
	// counter of the message it sent.
	send := func(q int) uint64 { return sendOneCounter(t, r, tmpls, q) }
	kp := r.peerAB.Current.Load()
	first := kp.SendCounter()
	for i := range uint64(3 * leaseMin) {
		if c := send(0); c != first+i {
			t.Fatalf("message %d: counter %d, want %d", i, c, first+i)
		}
		// One reservation of leaseMin for every leaseMin messages.
		if got, want := kp.SendCounter(), first+(i/leaseMin+1)*leaseMin; got != want {
			t.Fatalf("after message %d: %d counters reserved, want %d", i, got, want)
		}
	}

	// Two workers on one keypair: every counter once, each worker's in
	// rising order.
	seen := map[uint64]bool{}
	var last [2]uint64
	for i := range 10 * leaseMin {
		q := i % 2
		if i%7 == 0 {
			q = 1 - q
		}
		c := send(q)
		if seen[c] {
			t.Fatalf("counter %d sent twice", c)
		}
		if c < last[q] {
			t.Fatalf("queue %d: counter %d after %d", q, c, last[q])
		}
		seen[c], last[q] = true, c
	}

	// leased makes worker q hold a lease with counters left, and returns
	// the next of them.
	leased := func(q int) uint64 {
		t.Helper()
		pl := r.a.workers[q].met(r.peerAB)
		if pl.granted == 0 {
			send(q)
		}
		if pl.granted == 0 || pl.leaseOf != r.peerAB.Current.Load().serial {
			t.Fatalf("queue %d holds no lease of the current keypair", q)
		}
		return pl.nonce
	}

	// Others ran the counter more than leaseLag on: worker 0 drops its
	// lease (which still has counters) for a new reservation.
	c0 := leased(0)
	past, _ := kp.ReserveNonces(leaseLag + 1)
	if c := send(0); c < past+leaseLag+1 {
		t.Fatalf("after %d counters reserved from %d elsewhere, worker 0 sent %d (its old lease, from %d)", leaseLag+1, past, c, c0)
	}

	// A new session: the old lease is of another keypair, even where the
	// new one's counter has come close to it: the next counter is the new
	// keypair's own.
	next := leased(1)
	r.newSession()
	nkp := r.peerAB.Current.Load()
	if nkp == kp {
		t.Fatal("no new keypair")
	}
	if c := send(0); c != 0 {
		t.Errorf("queue 0, first message of the new session: counter %d, want 0", c)
	}
	nkp.ReserveNonces(int(next + 5 - nkp.SendCounter()))
	if c := send(1); c != next+5 {
		t.Errorf("queue 1, with a lease of the old keypair from %d, and the new one's counter at %d: sent %d, want %d", next, next+5, c, next+5)
	}
}

// TestOutboundLeaseLagFitsSmallWindows: a lease kept while other queues
// sent for the same keypair must not turn into counters that the smallest
// replay window in use among WireGuard peers rejects. boringtun (Cloudflare
// WARP and others) keeps 1,024 counters and drops one more than 1,024
// below the newest it received; the other queues go on sending while the
// worker's message is sealed and in flight, so the lag a lease may start
// with has to stay well inside those 1,024 (here: at most half of them).
func TestOutboundLeaseLagFitsSmallWindows(t *testing.T) {
	const smallestWindow = 1024 // boringtun's N_BITS
	r := newRig(t, rigConfig{queues: 2, srcPorts: 16})
	tmpls := queueTemplates(t, r, 2, 16, hostAddrB, 22)
	send := func(q int) uint64 { return sendOneCounter(t, r, tmpls, q) }
	kp := r.peerAB.Current.Load()
	for lag := 1; lag <= smallestWindow; lag += 37 {
		send(0)               // worker 0 holds a lease (or takes a new one)
		kp.ReserveNonces(lag) // the other queues sent lag messages
		newest := kp.SendCounter() - 1
		if c := send(0); newest > c && newest-c > smallestWindow/2 {
			t.Fatalf("after %d counters sent elsewhere, worker 0 sent counter %d, %d below the newest (%d): a %d-counter window keeps too little room for the other queues' messages in flight", lag, c, newest-c, newest, smallestWindow)
		}
	}
}

// sendOneCounter runs one burst of one frame (tmpls[q]) through worker q of
// r's gateway A and returns the counter of the transport message it sent.
func sendOneCounter(t *testing.T, r *rig, tmpls [][]byte, q int) uint64 {
	t.Helper()
	c, ok := trySend(t, r, tmpls, q, 0)
	if !ok {
		t.Fatalf("queue %d: nothing sent (drops %v)", q, TotalDrops(r.a.Stats()).List())
	}
	return c
}

// trySend runs one burst of one frame (tmpls[q]) through A's worker q at
// time now and returns the counter of the message it sent, or false if
// it sent nothing.
func trySend(t *testing.T, r *rig, tmpls [][]byte, q int, now int64) (uint64, bool) {
	t.Helper()
	var f [1]dataplane.Frame
	tx := r.hostA.Queue(q).TX()
	if tx.Alloc(f[:]) != 1 {
		t.Fatal("no frame")
	}
	f[0].SetLen(len(tmpls[q]))
	copy(f[0].Data(), tmpls[q])
	tx.Transmit(f[:])
	r.a.workers[q].outbound(now)
	rx := r.wanB.Queue(q).RX()
	if rx.Receive(f[:]) != 1 {
		return 0, false
	}
	d := f[0].Data()
	const off = header.EthernetLen + header.IPv4MinLen + header.UDPLen
	if len(d) < off+protocol.TransportHeaderSize || d[off] != protocol.TypeTransport {
		t.Fatalf("queue %d: not a transport message: % x", q, d[:min(len(d), off+16)])
	}
	c := binary.LittleEndian.Uint64(d[off+8:])
	rx.Free(f[:])
	return c, true
}

// TestSendLimits: a keypair sends until Reject-After-Time after its
// handshake and not at it (whitepaper §6.2), and not once it is dead:
// the senders' copies of the keypair's state (sendUntil, sendFlags) agree
// with Created and Dead.
func TestSendLimits(t *testing.T) {
	r := newRig(t, rigConfig{srcPorts: 16})
	tmpls := queueTemplates(t, r, 1, 16, hostAddrB, 22)
	kp := r.peerAB.Current.Load()
	limit := kp.Created + int64(protocol.RejectAfterTime)
	for _, now := range []int64{kp.Created, limit - 1} {
		if _, ok := trySend(t, r, tmpls, 0, now); !ok {
			t.Fatalf("nothing sent %d ns after the handshake (limit %v)", now-kp.Created, protocol.RejectAfterTime)
		}
	}
	if _, ok := trySend(t, r, tmpls, 0, limit); ok {
		t.Fatalf("sent at Reject-After-Time")
	}

	r = newRig(t, rigConfig{srcPorts: 16})
	tmpls = queueTemplates(t, r, 1, 16, hostAddrB, 22)
	kp = r.peerAB.Current.Load()
	if _, ok := trySend(t, r, tmpls, 0, kp.Created); !ok {
		t.Fatal("nothing sent on a live keypair")
	}
	kp.kill()
	if !kp.Dead() {
		t.Fatal("kill left the keypair alive")
	}
	if _, ok := trySend(t, r, tmpls, 0, kp.Created); ok {
		t.Fatal("sent on a dead keypair")
	}
}

// TestBurstLimit: New refuses a burst its 16-bit per-peer counts could not
// hold, and takes MaxBurst.
func TestBurstLimit(t *testing.T) {
	for _, c := range []struct {
		burst int
		ok    bool
	}{{MaxBurst, true}, {MaxBurst + 1, false}} {
		a, b, err := memport.NewPair(memport.Config{Name: "bl", MACA: mac(1), MACB: mac(2)})
		if err != nil {
			t.Fatal(err)
		}
		e, err := New(Config{LAN: a, WAN: b, ListenPort: portA, WANAddr4: wanAddrA, LANAddr4: lanAddrA,
			WANResolver: &staticResolver{}, LANResolver: &staticResolver{}, Burst: c.burst})
		if (err == nil) != c.ok {
			t.Errorf("burst %d: error %v, want ok %v", c.burst, err, c.ok)
		}
		if e != nil {
			e.Close()
		}
		a.Close()
		b.Close()
	}
}

// TestNewRefusesBadConfig: New refuses one port as both LAN and WAN (two
// owners of every queue half), a source-port range past 65535 (the ports
// wrapped around to 0 and the low ports, sent from and taken), an MTU
// no outer datagram holds, and one below 576; the edges are taken, 576
// and 1200 with an IPv6 WAN address too (as Linux's wg0: the outer family
// bounds nothing inside; it refused below 1280).
func TestNewRefusesBadConfig(t *testing.T) {
	a, b, err := memport.NewPair(memport.Config{Name: "nb", MACA: mac(1), MACB: mac(2)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	for _, c := range []struct {
		name string
		edit func(*Config)
		ok   bool
	}{
		{"LAN is WAN", func(c *Config) { c.WAN = c.LAN }, false},
		{"ports past 65535", func(c *Config) { c.ListenPort, c.SourcePorts = 65535, 2 }, false},
		{"ports to 65535", func(c *Config) { c.ListenPort, c.SourcePorts = 65534, 2 }, true},
		{"MTU too large", func(c *Config) { c.MTU = MaxMTU + 1 }, false},
		{"MTU at the maximum", func(c *Config) { c.MTU = MaxMTU }, true},
		{"MTU below 576", func(c *Config) { c.MTU = MinMTU - 1 }, false},
		{"MTU below 576, IPv6 WAN", func(c *Config) { c.MTU, c.WANAddr6 = MinMTU-1, wan6A }, false},
		{"MTU 576, IPv6 WAN", func(c *Config) { c.MTU, c.WANAddr6 = MinMTU, wan6A }, true},
		{"MTU 1200, IPv6 WAN", func(c *Config) { c.MTU, c.WANAddr6 = 1200, wan6A }, true},
		{"MTU 1200, IPv6 WAN alone", func(c *Config) { c.MTU, c.WANAddr4, c.WANAddr6 = 1200, netip.Addr{}, wan6A }, true},
	} {
		cfg := Config{LAN: a, WAN: b, ListenPort: portA, WANAddr4: wanAddrA, LANAddr4: lanAddrA,
			WANResolver: &staticResolver{}, LANResolver: &staticResolver{}}
		c.edit(&cfg)
		e, err := New(cfg)
		if (err == nil) != c.ok {
			t.Errorf("%s: error %v, want ok %v", c.name, err, c.ok)
		}
		if e != nil {
			e.Close()
		}
	}
}

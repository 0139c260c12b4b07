package bind

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/arp"
	"github.com/wgpio/wgpio/dataplane"
	"golang.zx2c4.com/wireguard/conn"
)

// TestNoAllocs: Send and receive allocate nothing once the endpoint is
// cached.
func TestNoAllocs(t *testing.T) {
	r := newRig(t, 1, nil)
	ep, _ := r.bind.ParseEndpoint("198.18.9.2:7")
	bufs := [][]byte{make([]byte, 64), make([]byte, 64)}
	frame := udpFrame(netip.AddrPortFrom(peerIP4, 1), netip.AddrPortFrom(ourIP4, ourPort), make([]byte, 64), false)
	rb, sizes, eps := recvBufs()
	fs := make([]dataplane.Frame, 8)
	rxB, txB := r.b.Queue(0).RX(), r.b.Queue(0).TX()
	step := func() {
		if err := r.bind.Send(bufs, ep); err != nil {
			t.Fatal(err)
		}
		n := rxB.Receive(fs)
		rxB.Free(fs[:n])
		txB.Alloc(fs[:1])
		fs[0].SetLen(len(frame))
		copy(fs[0].Data(), frame)
		txB.Transmit(fs[:1])
		if n, err := r.fns[0](rb, sizes, eps); n != 1 || err != nil {
			t.Fatalf("receive = %d, %v", n, err)
		}
	}
	step()
	if a := testing.AllocsPerRun(200, step); a != 0 {
		t.Errorf("allocs per Send + receive = %v, want 0", a)
	}
	// A receive that finds nothing spins (and may block) until a frame
	// another goroutine sends 20 µs later arrives: no allocation either.
	kick, sent := make(chan struct{}), make(chan struct{})
	go func() {
		for range kick {
			for t0 := time.Now(); time.Since(t0) < 20*time.Microsecond; {
			}
			txB.Alloc(fs[4:5])
			fs[4].SetLen(len(frame))
			copy(fs[4].Data(), frame)
			txB.Transmit(fs[4:5])
			sent <- struct{}{}
		}
	}()
	defer close(kick)
	late := func() {
		kick <- struct{}{}
		if n, err := r.fns[0](rb, sizes, eps); n != 1 || err != nil {
			t.Fatalf("receive = %d, %v", n, err)
		}
		<-sent
	}
	late()
	if a := testing.AllocsPerRun(200, late); a != 0 {
		t.Errorf("allocs per receive that waits = %v, want 0", a)
	}
}

// FuzzReceive feeds arbitrary frames to the receive path: no panic, and a
// frame is either a datagram for us or counted once.
func FuzzReceive(f *testing.F) {
	// Seeds: a good IPv4 and IPv6 datagram, a runt, an ARP request.
	f.Add(udpFrame(netip.AddrPortFrom(peerIP4, 1), netip.AddrPortFrom(ourIP4, ourPort), []byte("x"), false))
	f.Add(udpFrame(netip.AddrPortFrom(peerIP6, 1), netip.AddrPortFrom(ourIP6, ourPort), []byte("y"), false))
	f.Add([]byte{1, 2, 3})
	arpReq := make([]byte, 60)
	n, _ := (&arp.ARP{EthDst: arp.Broadcast, EthSrc: arp.MAC(macB), Op: arp.ARPRequest, SenderMAC: arp.MAC(macB), SenderIP: peerIP4, TargetIP: ourIP4}).Marshal(arpReq)
	f.Add(arpReq[:n])
	r := newRig(f, 1, func(c *Config) { c.VerifyChecksum = true })
	q := r.bind.gen.rxs[0]
	q.local = r.bind.local.Load() // as receive loads it for each burst
	buf := make([]byte, 2048)
	f.Fuzz(func(t *testing.T, frame []byte) {
		before := r.bind.Stats()
		var size int
		var ep conn.Endpoint
		ok := q.handle(frame, buf, &size, &ep)
		after := r.bind.Stats()
		var db, da uint64
		for i := range before.Drops {
			db += before.Drops[i]
			da += after.Drops[i]
		}
		switch {
		case ok && (ep == nil || size > len(frame)):
			t.Fatalf("handle = true with endpoint %v, size %d of a %d-byte frame", ep, size, len(frame))
		case !ok && da != db+1:
			t.Fatalf("handle = false, drops went %d → %d, want one more", db, da)
		}
	})
}

// BenchmarkSendReceive moves 64-byte datagrams in batches of 64 from one
// Bind to another over memport, beside the reference: wireguard-go's
// StdNetBind over loopback kernel UDP sockets.
func BenchmarkSendReceive(b *testing.B) {
	const batch, size = 64, 64
	payload := make([][]byte, batch)
	for i := range payload {
		payload[i] = make([]byte, size)
	}
	run := func(b *testing.B, send func() error, fn conn.ReceiveFunc) {
		rb, sizes, eps := recvBufs()
		b.ReportAllocs()
		b.SetBytes(batch * size)
		b.ResetTimer()
		start := time.Now()
		got := 0
		for range b.N {
			if err := send(); err != nil {
				b.Fatal(err)
			}
			for want := got + batch; got < want; {
				n, err := fn(rb, sizes, eps)
				if err != nil {
					b.Fatal(err)
				}
				got += n
			}
		}
		b.ReportMetric(float64(got)/time.Since(start).Seconds(), "pps")
	}
	b.Run("wgpio-memport", func(b *testing.B) {
		r := newRig(b, 1, nil)
		// A second Bind on the peer port receives.
		routes, _ := arp.NewStaticRoutes([]arp.Route{{Prefix: netip.MustParsePrefix("198.18.9.0/24")}})
		tbl := arp.NewTable(arp.Config{})
		tbl.Set(ourIP4, arp.MAC(macA), arp.StateReachable)
		peer, err := New(Config{Port: r.b, Addr4: peerIP4, ListenPort: 7, Routes: routes, Neighbours: tbl})
		if err != nil {
			b.Fatal(err)
		}
		fns, _, err := peer.Open(0)
		if err != nil {
			b.Fatal(err)
		}
		defer peer.Close()
		ep, _ := r.bind.ParseEndpoint("198.18.9.2:7")
		run(b, func() error { return r.bind.Send(payload, ep) }, fns[0])
	})
	b.Run("std-loopback", func(b *testing.B) {
		rx, tx := conn.NewStdNetBind(), conn.NewStdNetBind()
		fns, port, err := rx.Open(0)
		if err != nil {
			b.Skipf("kernel UDP: %v", err)
		}
		defer rx.Close()
		if _, _, err := tx.Open(0); err != nil {
			b.Fatal(err)
		}
		defer tx.Close()
		ep, err := tx.ParseEndpoint(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port).String())
		if err != nil {
			b.Fatal(err)
		}
		// The IPv4 receive function comes first on Linux.
		run(b, func() error { return tx.Send(payload, ep) }, fns[0])
	})
}

// TestSendFrameTooLong: a frame longer than a frame buffer is refused with
// an error that wraps dataplane.ErrFrameTooLong (for errors.Is), and
// counted as too big.
func TestSendFrameTooLong(t *testing.T) {
	r := newRig(t, 1, nil)
	if err := r.bind.SendFrame(make([]byte, 1<<16)); !errors.Is(err, dataplane.ErrFrameTooLong) {
		t.Errorf("SendFrame(64 KiB) = %v, want dataplane.ErrFrameTooLong", err)
	}
	if got := r.bind.Stats().Drops[DropTooBig]; got != 1 {
		t.Errorf("Stats().Drops[DropTooBig] = %d, want 1", got)
	}
}

// TestSendMoreThanBatchSize: Send takes more than BatchSize datagrams at
// once and sends every one of them, in order, BatchSize at a time.
func TestSendMoreThanBatchSize(t *testing.T) {
	r := newRig(t, 1, nil)
	ep, err := r.bind.ParseEndpoint(netip.AddrPortFrom(peerIP4, 51821).String())
	if err != nil {
		t.Fatal(err)
	}
	n := 2*BatchSize + 1
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = []byte{byte(i), byte(i >> 8)}
	}
	if err := r.bind.Send(bufs, ep); err != nil {
		t.Fatalf("Send(%d datagrams) = %v", n, err)
	}
	got := r.collect(t, n, 5*time.Second)
	if len(got) != n {
		t.Fatalf("peer received %d frames, want %d", len(got), n)
	}
	for i, f := range got {
		if p := f[len(f)-2:]; p[0] != byte(i) || p[1] != byte(i>>8) {
			t.Fatalf("frame %d carries datagram %d, want %d", i, int(p[0])|int(p[1])<<8, i)
		}
	}
}

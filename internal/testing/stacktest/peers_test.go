package stacktest

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/wgpio/wgpio/dataplane"
	"github.com/wgpio/wgpio/dataplane/memport"
	"github.com/wgpio/wgpio/fastpath"
	"github.com/wgpio/wgpio/gateway"
	"github.com/wgpio/wgpio/header"
	"github.com/wgpio/wgpio/noise"
)

// vpeer is a remote WireGuard peer simulated in the test with package noise
// (the handshake) and a fastpath.Keypair (sealing and opening), reached
// through the far end of gwA's WAN wire.
type vpeer struct {
	priv  noise.PrivateKey
	hs    *noise.Handshake
	addr  netip.AddrPort // its outer address
	inner netip.Addr     // its allowed IP at gwA
	kp    *fastpath.Keypair
	index uint32
	sent  uint64
}

// wanIO writes UDP payloads onto gwA's WAN wire and reads what gwA sends.
type wanIO struct {
	t     testing.TB
	port  *memport.Port // the far end of gwA's WAN
	gwMAC [6]byte
	gw    netip.AddrPort
}

func (w *wanIO) send(from netip.AddrPort, payload []byte) {
	tx := w.port.Queue(0).TX()
	var fr [1]dataplane.Frame
	for tx.Alloc(fr[:]) != 1 {
		time.Sleep(50 * time.Microsecond)
		tx.Reclaim()
	}
	f := &fr[0]
	n := header.EthernetLen + header.IPv4MinLen + header.UDPLen + len(payload)
	f.SetLen(n)
	b := f.Data()
	header.PutEthernet(b, header.MAC(w.gwMAC), header.MAC(mac6(w.port.MAC())), header.EtherTypeIPv4)
	ip := header.IPv4Fields{Protocol: header.ProtoUDP, Src: from.Addr().As4(), Dst: w.gw.Addr().As4()}
	header.PutIPv4(b[14:], &ip, header.UDPLen+len(payload))
	header.PutUDP(b[34:], from.Port(), w.gw.Port(), len(payload))
	copy(b[42:], payload)
	for tx.Transmit(fr[:]) != 1 {
		time.Sleep(50 * time.Microsecond)
	}
}

// recv drains gwA's output on the WAN and calls fn with (destination,
// payload) for each UDP datagram.
func (w *wanIO) recv(fn func(dst netip.AddrPort, payload []byte)) int {
	buf := make([]dataplane.Frame, 64)
	total := 0
	for q := 0; q < w.port.NumQueues(); q++ {
		rx := w.port.Queue(q).RX()
		n := rx.Receive(buf)
		for i := 0; i < n; i++ {
			var p header.Packet
			d := buf[i].Data()
			if header.Parse(d, &p) == header.OK && p.Proto == header.ProtoUDP {
				fn(netip.AddrPortFrom(p.Dst, p.DstPort), d[p.PayloadOff:p.PayloadOff+p.PayloadLen])
			}
		}
		rx.Free(buf[:n])
		total += n
	}
	return total
}

// TestThousandPeers gives gwA 1,000 peers, each completing a real handshake
// (Noise_IKpsk2 through package noise on the peer's side, gwA's control
// plane on ours), then sends data from every peer to hostA and from hostA to
// every peer at once, over 2 queues (outer source ports spread by RSS).
func TestThousandPeers(t *testing.T) {
	const npeers = 1000
	clk := newClock()
	hostA, lanA, err := memport.NewPair(memport.Config{Name: "h", Queues: 2, MACA: hw(1), MACB: hw(2)})
	if err != nil {
		t.Fatal(err)
	}
	defer hostA.Close()
	defer lanA.Close()
	wanA, far, err := memport.NewPair(memport.Config{Name: "w", Queues: 2, MACA: hw(3), MACB: hw(4), PoolFrames: 16384})
	if err != nil {
		t.Fatal(err)
	}
	defer wanA.Close()
	defer far.Close()
	gwAddr := netip.MustParseAddr("198.18.200.1")
	eng, err := fastpath.New(fastpath.Config{
		LAN: lanA, WAN: wanA, ListenPort: 51820, WANAddr4: gwAddr,
		WANResolver: resolver(mac6(far.MAC())), LANResolver: resolver(mac6(hostA.MAC())), Now: clk.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	gwPriv, _ := noise.NewPrivateKey()
	dev, err := gateway.New(gateway.Options{
		PrivateKey: gwPriv, ListenPort: 51820, Dataplane: eng, Now: clk.Now, WallClock: clk.Wall,
		WANMAC: mac6(wanA.MAC()), WANAddr4: gwAddr, TickInterval: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	peers := make([]*vpeer, npeers)
	for i := range peers {
		p := &vpeer{
			addr:  netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, byte(100 + i/250), byte(1 + i%250)}), uint16(40000+i)),
			inner: netip.AddrFrom4([4]byte{198, 19, byte(128 + i/250), byte(1 + i%250)}),
			index: uint32(0x10000 + i),
		}
		p.priv, _ = noise.NewPrivateKey()
		p.hs = noise.NewHandshake(noise.NewStaticIdentity(p.priv, nil), gwPriv.PublicKey(), noise.PresharedKey{})
		peers[i] = p
		if err := dev.AddPeer(gateway.PeerConfig{PublicKey: p.priv.PublicKey(), AllowedIPs: []netip.Prefix{netip.PrefixFrom(p.inner, 32)}}); err != nil {
			t.Fatal(err)
		}
	}
	eng.Start()
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	w := &wanIO{t: t, port: far, gwMAC: mac6(wanA.MAC()), gw: netip.AddrPortFrom(gwAddr, 51820)}
	byIndex := make(map[uint32]*vpeer, npeers)
	for _, p := range peers {
		byIndex[p.index] = p
	}
	// Handshakes, in waves so that the control plane is not "under load"
	// for long; cookie replies are honoured (the initiation is resent with
	// MAC2), as a real initiator does.
	handle := func(dst netip.AddrPort, msg []byte) {
		recv, ok := noise.MessageReceiver(msg)
		if !ok {
			return
		}
		p := byIndex[recv]
		if p == nil || p.kp != nil {
			return
		}
		switch msg[0] {
		case noise.TypeResponse:
			if err := p.hs.ConsumeResponse(msg); err != nil {
				t.Errorf("peer %v: consume response: %v", p.addr, err)
				return
			}
			keys, err := p.hs.DeriveKeys()
			if err != nil {
				t.Errorf("peer %v: derive keys: %v", p.addr, err)
				return
			}
			p.kp, _ = fastpath.NewKeypair(&keys.Send, &keys.Receive, keys.LocalIndex, keys.RemoteIndex, true, 0, nil)
			keys.Zero()
		case noise.TypeCookieReply:
			if err := p.hs.ConsumeCookieReply(msg); err != nil {
				t.Errorf("peer %v: cookie reply: %v", p.addr, err)
			}
			var init [noise.InitiationSize]byte
			if err := p.hs.CreateInitiation(&init, p.index); err == nil {
				w.send(p.addr, init[:])
			}
		}
	}
	const wave = 50
	for start := 0; start < npeers; start += wave {
		for _, p := range peers[start:min(start+wave, npeers)] {
			var init [noise.InitiationSize]byte
			if err := p.hs.CreateInitiation(&init, p.index); err != nil {
				t.Fatal(err)
			}
			w.send(p.addr, init[:])
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			w.recv(handle)
			done := true
			for _, p := range peers[start:min(start+wave, npeers)] {
				done = done && p.kp != nil
			}
			if done {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("handshakes of peers %d..%d not complete; gateway stats %+v", start, start+wave, dev.Stats())
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	// Data from every peer to hostA (this confirms gwA's responder
	// sessions), then from hostA to every peer, all at once.
	for _, p := range peers {
		pkt := make([]byte, 16+32+16)
		ip := header.IPv4Fields{Protocol: header.ProtoUDP, Src: p.inner.As4(), Dst: [4]byte{198, 19, 1, 10}}
		header.PutIPv4(pkt[16:], &ip, 12)
		header.PutUDP(pkt[36:], 7, 7, 4)
		binary.BigEndian.PutUint32(pkt[44:], p.index)
		noise.PutTransportHeader(pkt, p.kp.RemoteIndex, p.sent)
		p.kp.Seal(pkt[16:16], pkt[16:48], p.sent)
		p.sent++
		w.send(p.addr, pkt)
	}
	got := make(map[uint32]bool)
	deadline := time.Now().Add(20 * time.Second)
	buf := make([]dataplane.Frame, 64)
	for len(got) < npeers && time.Now().Before(deadline) {
		for q := 0; q < hostA.NumQueues(); q++ {
			rx := hostA.Queue(q).RX()
			n := rx.Receive(buf)
			for i := 0; i < n; i++ {
				d := buf[i].Data()
				if len(d) >= 46 {
					got[binary.BigEndian.Uint32(d[42:])] = true
				}
			}
			rx.Free(buf[:n])
		}
		time.Sleep(100 * time.Microsecond)
	}
	if len(got) != npeers {
		t.Fatalf("hostA received from %d of %d peers; drops %v", len(got), npeers, fastpath.TotalDrops(eng.Stats()))
	}
	// hostA → every peer.
	tx := hostA.Queue(0).TX()
	for i, p := range peers {
		var fr [1]dataplane.Frame
		for tx.Alloc(fr[:]) != 1 {
			time.Sleep(50 * time.Microsecond)
		}
		f := &fr[0]
		f.SetLen(14 + 20 + 8 + 4)
		b := f.Data()
		header.PutEthernet(b, header.MAC(mac6(lanA.MAC())), header.MAC(mac6(hostA.MAC())), header.EtherTypeIPv4)
		ip := header.IPv4Fields{Protocol: header.ProtoUDP, Src: [4]byte{198, 19, 1, 10}, Dst: p.inner.As4()}
		header.PutIPv4(b[14:], &ip, 12)
		header.PutUDP(b[34:], 7, uint16(1000+i), 4)
		binary.BigEndian.PutUint32(b[42:], p.index)
		for tx.Transmit(fr[:]) != 1 {
			time.Sleep(50 * time.Microsecond)
		}
		if i%64 == 63 {
			time.Sleep(300 * time.Microsecond)
		}
	}
	back := make(map[netip.AddrPort]bool)
	byAddr := make(map[netip.AddrPort]*vpeer)
	for _, p := range peers {
		byAddr[p.addr] = p
	}
	deadline = time.Now().Add(20 * time.Second)
	for len(back) < npeers && time.Now().Before(deadline) {
		w.recv(func(dst netip.AddrPort, msg []byte) {
			p := byAddr[dst]
			recv, ctr, ok := noise.ParseTransportHeader(msg)
			if p == nil || !ok || recv != p.kp.LocalIndex {
				return
			}
			pt, ok := p.kp.Open(append([]byte(nil), msg[16:]...), ctr)
			if !ok || len(pt) < 32 || binary.BigEndian.Uint32(pt[28:]) != p.index {
				t.Errorf("peer %v: bad transport data from gwA", dst)
				return
			}
			back[dst] = true
		})
		time.Sleep(100 * time.Microsecond)
	}
	if len(back) != npeers {
		t.Fatalf("%d of %d peers received gwA's data; drops %v", len(back), npeers, fastpath.TotalDrops(eng.Stats()))
	}
	used := 0
	for _, q := range eng.Stats() {
		if q.Decrypted > 0 {
			used++
		}
	}
	if used != 2 {
		t.Errorf("peers' data decrypted on %d queues, want both", used)
	}
	if s := dev.Stats(); s.KeypairsInstalledTotal != npeers {
		t.Errorf("keypairs installed = %d, want %d", s.KeypairsInstalledTotal, npeers)
	}
	t.Logf("gateway stats: %+v", dev.Stats())
}
